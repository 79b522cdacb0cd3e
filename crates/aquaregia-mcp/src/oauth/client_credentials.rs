//! The client credentials grant (machine-to-machine), the client authenticating with its secret
//! or with a JWT signed by its private key (RFC 7523).

use std::fmt;
use std::str::FromStr;

use rmcp::transport::auth::{
    AuthError, AuthorizationManager, ClientCredentialsConfig, JwtSigningAlgorithm,
};

use super::OAuth;
use crate::transport::compat::run_not_send;

/// The algorithm of a client's signing key, for
/// [`OAuth::client_credentials_jwt`](super::OAuth::client_credentials_jwt).
///
/// Parses from (and displays as) the JOSE names: `"ES256".parse::<JwtAlgorithm>()`.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum JwtAlgorithm {
    /// RSASSA-PKCS1-v1_5 with SHA-256.
    Rs256,
    /// RSASSA-PKCS1-v1_5 with SHA-384.
    Rs384,
    /// RSASSA-PKCS1-v1_5 with SHA-512.
    Rs512,
    /// ECDSA on P-256 with SHA-256.
    Es256,
    /// ECDSA on P-384 with SHA-384.
    Es384,
}

impl JwtAlgorithm {
    const ALL: [(Self, &'static str); 5] = [
        (Self::Rs256, "RS256"),
        (Self::Rs384, "RS384"),
        (Self::Rs512, "RS512"),
        (Self::Es256, "ES256"),
        (Self::Es384, "ES384"),
    ];

    fn for_rmcp(self) -> JwtSigningAlgorithm {
        match self {
            Self::Rs256 => JwtSigningAlgorithm::RS256,
            Self::Rs384 => JwtSigningAlgorithm::RS384,
            Self::Rs512 => JwtSigningAlgorithm::RS512,
            Self::Es256 => JwtSigningAlgorithm::ES256,
            Self::Es384 => JwtSigningAlgorithm::ES384,
        }
    }
}

impl fmt::Display for JwtAlgorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = Self::ALL
            .iter()
            .find(|(algorithm, _)| algorithm == self)
            .map_or("?", |(_, name)| name);
        f.write_str(name)
    }
}

impl FromStr for JwtAlgorithm {
    type Err = String;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .iter()
            .find(|(_, known)| known.eq_ignore_ascii_case(name))
            .map(|(algorithm, _)| *algorithm)
            .ok_or_else(|| {
                format!("unsupported JWT signing algorithm `{name}` (RS256, RS384, RS512, ES256 or ES384)")
            })
    }
}

/// rmcp's configuration of the grant for `oauth`, asking for `scopes` of `resource`.
pub(super) fn config(
    oauth: &OAuth,
    scopes: Vec<String>,
    resource: &str,
) -> ClientCredentialsConfig {
    let client_id = oauth.client_id.clone().unwrap_or_default();
    let resource = Some(resource.to_owned());
    match &oauth.signing_key {
        Some((pem, algorithm)) => ClientCredentialsConfig::PrivateKeyJwt {
            client_id,
            signing_key: pem.clone().into_bytes(),
            signing_algorithm: algorithm.for_rmcp(),
            token_endpoint_audience: None,
            scopes,
            resource,
        },
        None => ClientCredentialsConfig::ClientSecret {
            client_id,
            client_secret: oauth.client_secret.clone().unwrap_or_default(),
            scopes,
            resource,
        },
    }
}

/// Runs the grant; the tokens land in the manager's store, and the manager comes back when
/// it is done (the exchange runs off this task: see [`run_not_send`]).
pub(super) async fn exchange(
    mut manager: AuthorizationManager,
    config: ClientCredentialsConfig,
) -> Result<AuthorizationManager, AuthError> {
    manager.configure_client_credentials(&config)?;
    run_not_send(move || async move {
        manager
            .exchange_client_credentials(&config)
            .await
            .map(|_| manager)
    })
    .await
    .map_err(|error| AuthError::InternalError(format!("the token request stopped: {error}")))?
}

#[cfg(test)]
mod tests {
    use super::JwtAlgorithm;

    #[test]
    fn algorithms_parse_from_their_jose_names() {
        for (algorithm, name) in JwtAlgorithm::ALL {
            assert_eq!(name.parse::<JwtAlgorithm>(), Ok(algorithm));
            assert_eq!(algorithm.to_string(), name);
        }
        assert_eq!("es256".parse::<JwtAlgorithm>(), Ok(JwtAlgorithm::Es256));
        let error = "HS256".parse::<JwtAlgorithm>().unwrap_err();
        assert!(error.contains("HS256"), "{error}");
    }
}

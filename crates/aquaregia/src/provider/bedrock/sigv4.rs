//! SigV4 request signing for Bedrock with `aws-sigv4`, from static credentials: the
//! environment (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`) or the
//! shared credentials file (`AWS_SHARED_CREDENTIALS_FILE`, else `~/.aws/credentials`; profile
//! `AWS_PROFILE`, else `default`). SSO, assumed roles, process credentials and instance
//! metadata are not read.

use std::path::PathBuf;
use std::time::SystemTime;

use aws_credential_types::Credentials;
use aws_sigv4::http_request::{SignableBody, SignableRequest, SigningSettings, sign};
use aws_sigv4::sign::v4;
use aws_smithy_runtime_api::client::identity::Identity;
use futures::future::BoxFuture;
use reqwest::Url;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};

use crate::error::{ConfigError, Error};
use crate::http::{HttpConfig, RequestSigner};

/// The service name Bedrock's runtime is signed for.
const SERVICE: &str = "bedrock";

/// Signs requests for one region with one set of credentials.
pub(crate) struct SigV4Signer {
    identity: Identity,
    region: String,
    /// The signing time; `None` for the current time (tests fix it).
    time: Option<SystemTime>,
}

impl std::fmt::Debug for SigV4Signer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SigV4Signer")
            .field("region", &self.region)
            .finish_non_exhaustive()
    }
}

fn credentials_error(message: impl Into<String>) -> Error {
    Error::Config(ConfigError::Credentials(message.into()))
}

impl SigV4Signer {
    /// A signer with these credentials for `region`.
    pub(crate) fn new(
        access_key_id: &str,
        secret_access_key: &str,
        session_token: Option<String>,
        region: &str,
    ) -> Self {
        crate::redact::register(secret_access_key);
        if let Some(token) = &session_token {
            crate::redact::register(token);
        }
        let credentials = Credentials::new(
            access_key_id,
            secret_access_key,
            session_token,
            None,
            "aquaregia",
        );
        Self {
            identity: credentials.into(),
            region: region.to_owned(),
            time: None,
        }
    }

    /// The signer of the environment's credentials and region (see the module docs).
    pub(crate) fn from_env() -> Result<Self, Error> {
        let region = region().ok_or_else(|| {
            credentials_error(
                "no AWS region: set AWS_REGION (or AWS_DEFAULT_REGION, or `region` in the \
                 profile of ~/.aws/config)",
            )
        })?;
        if let (Some(id), Some(secret)) = (env("AWS_ACCESS_KEY_ID"), env("AWS_SECRET_ACCESS_KEY")) {
            return Ok(Self::new(&id, &secret, env("AWS_SESSION_TOKEN"), &region));
        }
        let path = env("AWS_SHARED_CREDENTIALS_FILE")
            .map(PathBuf::from)
            .or_else(|| dirs::home_dir().map(|home| home.join(".aws").join("credentials")));
        let profile = profile_name();
        let section = path
            .as_ref()
            .and_then(|path| std::fs::read_to_string(path).ok())
            .and_then(|text| ini_section(&text, &profile));
        let Some(section) = section else {
            return Err(credentials_error(format!(
                "no AWS credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or add \
                 profile `{profile}` to {} (static keys only), or set a Bedrock API key in \
                 AWS_BEARER_TOKEN_BEDROCK",
                path.map_or_else(
                    || "~/.aws/credentials".to_owned(),
                    |p| p.display().to_string()
                )
            )));
        };
        let field = |key: &str| {
            section
                .iter()
                .find(|(k, _)| k == key)
                .map(|(_, v)| v.clone())
        };
        match (field("aws_access_key_id"), field("aws_secret_access_key")) {
            (Some(id), Some(secret)) => {
                Ok(Self::new(&id, &secret, field("aws_session_token"), &region))
            }
            _ => Err(credentials_error(format!(
                "profile `{profile}` has no aws_access_key_id and aws_secret_access_key (only \
                 static keys are read)"
            ))),
        }
    }

    /// Signs at `time` instead of now.
    #[cfg(test)]
    pub(crate) fn at(mut self, time: SystemTime) -> Self {
        self.time = Some(time);
        self
    }

    /// The SigV4 headers of a request for `service`.
    pub(crate) fn sign_request(
        &self,
        service: &str,
        settings: SigningSettings,
        request: (&str, &str, &[(&str, &str)], &[u8]),
    ) -> Result<Vec<(HeaderName, HeaderValue)>, Error> {
        let (method, url, headers, body) = request;
        let params = v4::SigningParams::builder()
            .identity(&self.identity)
            .region(&self.region)
            .name(service)
            .time(self.time.unwrap_or_else(SystemTime::now))
            .settings(settings)
            .build()
            .map_err(|error| credentials_error(format!("SigV4: {error}")))?
            .into();
        let request = SignableRequest::new(
            method,
            url,
            headers.iter().copied(),
            SignableBody::Bytes(body),
        )
        .map_err(|error| credentials_error(format!("SigV4: {error}")))?;
        let (instructions, _signature) = sign(request, &params)
            .map_err(|error| credentials_error(format!("SigV4: {error}")))?
            .into_parts();
        let (headers, _params) = instructions.into_parts();
        headers
            .into_iter()
            .map(|header| {
                let mut value = HeaderValue::from_str(header.value())
                    .map_err(|_| credentials_error("SigV4 produced a header that is not text"))?;
                value.set_sensitive(header.sensitive() || header.name() == "authorization");
                Ok((HeaderName::from_static(header.name()), value))
            })
            .collect()
    }
}

impl RequestSigner for SigV4Signer {
    fn sign<'a>(
        &'a self,
        _http: &'a HttpConfig,
        url: &'a Url,
        headers: &'a HeaderMap,
        body: &'a [u8],
    ) -> BoxFuture<'a, Result<Vec<(HeaderName, HeaderValue)>, Error>> {
        Box::pin(std::future::ready(self.sign_now(url, headers, body)))
    }
}

impl SigV4Signer {
    /// The SigV4 headers of a POST of `body` to `url` with `headers`.
    fn sign_now(
        &self,
        url: &Url,
        headers: &HeaderMap,
        body: &[u8],
    ) -> Result<Vec<(HeaderName, HeaderValue)>, Error> {
        // Only the content type is signed besides what SigV4 adds: other headers (proxies,
        // the HTTP client's own) may change on the way.
        let signed: Vec<(&str, &str)> = headers
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .map(|value| ("content-type", value))
            .into_iter()
            .collect();
        let settings = SigningSettings::default();
        self.sign_request(SERVICE, settings, ("POST", url.as_str(), &signed, body))
    }
}

fn env(name: &str) -> Option<String> {
    std::env::var(name)
        .ok()
        .map(|value| value.trim().to_owned())
        .filter(|value| !value.is_empty())
}

fn profile_name() -> String {
    env("AWS_PROFILE").unwrap_or_else(|| "default".to_owned())
}

/// The region: `AWS_REGION`, `AWS_DEFAULT_REGION`, or the profile's `region` in the shared
/// config file (`AWS_CONFIG_FILE`, else `~/.aws/config`).
pub(crate) fn region() -> Option<String> {
    env("AWS_REGION")
        .or_else(|| env("AWS_DEFAULT_REGION"))
        .or_else(|| {
            let path = env("AWS_CONFIG_FILE")
                .map(PathBuf::from)
                .or_else(|| dirs::home_dir().map(|home| home.join(".aws").join("config")))?;
            let text = std::fs::read_to_string(path).ok()?;
            let profile = profile_name();
            let section = if profile == "default" {
                ini_section(&text, "default")
            } else {
                ini_section(&text, &format!("profile {profile}"))
                    .or_else(|| ini_section(&text, &profile))
            }?;
            section
                .into_iter()
                .find(|(key, _)| key == "region")
                .map(|(_, value)| value)
        })
}

/// The `key = value` lines of `[name]` in an INI text (keys lower-cased).
fn ini_section(text: &str, name: &str) -> Option<Vec<(String, String)>> {
    let mut in_section = false;
    let mut found = false;
    let mut fields = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with(['#', ';']) {
            continue;
        }
        if let Some(header) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            in_section = header.trim() == name;
            found |= in_section;
            continue;
        }
        if in_section && let Some((key, value)) = line.split_once('=') {
            fields.push((key.trim().to_ascii_lowercase(), value.trim().to_owned()));
        }
    }
    found.then_some(fields)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// AWS's SigV4 test suite (`aws-sig-v4-test-suite`), the `get-vanilla` and
    /// `post-x-www-form-urlencoded` cases: the documented example credentials, region
    /// `us-east-1`, service `service`, at 2015-08-30T12:36:00Z.
    fn suite_signer() -> SigV4Signer {
        SigV4Signer::new(
            "AKIDEXAMPLE",
            "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
            None,
            "us-east-1",
        )
        .at(SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_440_938_160))
    }

    fn header<'a>(headers: &'a [(HeaderName, HeaderValue)], name: &str) -> &'a str {
        headers
            .iter()
            .find(|(n, _)| n.as_str() == name)
            .and_then(|(_, v)| v.to_str().ok())
            .unwrap_or_default()
    }

    fn authorization(
        signer: &SigV4Signer,
        settings: SigningSettings,
        request: (&str, &str, &[(&str, &str)], &[u8]),
    ) -> String {
        let headers = signer.sign_request("service", settings, request).unwrap();
        assert_eq!(header(&headers, "x-amz-date"), "20150830T123600Z");
        header(&headers, "authorization").to_owned()
    }

    const CREDENTIAL: &str =
        "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request";

    #[test]
    fn aws_test_suite_get_vanilla() {
        let request = ("GET", "https://example.amazonaws.com/", &[][..], &b""[..]);
        assert_eq!(
            authorization(&suite_signer(), SigningSettings::default(), request),
            format!(
                "{CREDENTIAL}, SignedHeaders=host;x-amz-date, \
                 Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"
            )
        );
    }

    #[test]
    fn aws_test_suite_get_vanilla_with_session_token() {
        let token = "6e86291e8372ff2a2260956d9b8aae1d763fbf315fa00fa31553b73ebf194267";
        let signer = SigV4Signer::new(
            "AKIDEXAMPLE",
            "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
            Some(token.to_owned()),
            "us-east-1",
        )
        .at(SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_440_938_160));
        let request = ("GET", "https://example.amazonaws.com/", &[][..], &b""[..]);
        let headers = signer
            .sign_request("service", SigningSettings::default(), request)
            .unwrap();
        assert_eq!(header(&headers, "x-amz-security-token"), token);
        assert_eq!(
            header(&headers, "authorization"),
            format!(
                "{CREDENTIAL}, SignedHeaders=host;x-amz-date;x-amz-security-token, \
                 Signature=07ec1639c89043aa0e3e2de82b96708f198cceab042d4a97044c66dd9f74e7f8"
            )
        );
    }

    /// The suite signs this body with its hash in `x-amz-content-sha256`.
    #[test]
    fn aws_test_suite_post_x_www_form_urlencoded() {
        let mut settings = SigningSettings::default();
        settings.payload_checksum_kind = aws_sigv4::http_request::PayloadChecksumKind::XAmzSha256;
        let headers = [
            ("content-type", "application/x-www-form-urlencoded"),
            ("content-length", "13"),
        ];
        let request = (
            "POST",
            "https://example.amazonaws.com/",
            &headers[..],
            &b"Param1=value1"[..],
        );
        assert_eq!(
            authorization(&suite_signer(), settings, request),
            format!(
                "{CREDENTIAL}, SignedHeaders=content-length;content-type;host;\
                 x-amz-content-sha256;x-amz-date, \
                 Signature=d3875051da38690788ef43de4db0d8f280229d82040bfac253562e56c3f20e0b"
            )
        );
    }

    #[test]
    fn a_session_token_is_sent_and_the_secret_never_shows() {
        let signer = SigV4Signer::new(
            "AKID",
            "secret-key-value",
            Some("token-value".into()),
            "eu-west-3",
        );
        let url = "https://bedrock-runtime.eu-west-3.amazonaws.com/model/m/converse";
        let headers = signer
            .sign_request(
                "bedrock",
                SigningSettings::default(),
                ("POST", url, &[], b"{}"),
            )
            .unwrap();
        assert_eq!(header(&headers, "x-amz-security-token"), "token-value");
        assert!(header(&headers, "authorization").contains("/eu-west-3/bedrock/aws4_request"));
        assert!(!format!("{signer:?}").contains("secret-key-value"));
    }

    #[test]
    fn profile_sections_are_read() {
        let text = "[default]\naws_access_key_id = A\n\n[profile work]\nregion=eu-west-1\n[work]\nAWS_SECRET_ACCESS_KEY = S\n";
        assert_eq!(
            ini_section(text, "default").unwrap(),
            [("aws_access_key_id".to_owned(), "A".to_owned())]
        );
        assert_eq!(
            ini_section(text, "profile work").unwrap(),
            [("region".to_owned(), "eu-west-1".to_owned())]
        );
        assert_eq!(
            ini_section(text, "work").unwrap(),
            [("aws_secret_access_key".to_owned(), "S".to_owned())]
        );
        assert!(ini_section(text, "missing").is_none());
    }
}

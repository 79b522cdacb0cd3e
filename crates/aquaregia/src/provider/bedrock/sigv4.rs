//! SigV4 request signing for Bedrock, from static credentials: the environment
//! (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`) or the shared
//! credentials file (`AWS_SHARED_CREDENTIALS_FILE`, else `~/.aws/credentials`; profile
//! `AWS_PROFILE`, else `default`). SSO, assumed roles, process credentials and instance
//! metadata are not read.
//!
//! The provider's requests are signed by [`direct`] (the canonical request written out, the
//! signing key derived once a day); anything else, and the AWS test suite's cases, by
//! `aws-sigv4`'s general signer, which gives byte-identical headers.

mod direct;

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
    /// The same credentials, for the provider's requests.
    direct: direct::DirectSigner,
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
        let direct = direct::DirectSigner::new(
            access_key_id,
            secret_access_key,
            session_token.as_deref(),
            region,
            SERVICE,
        );
        let credentials = Credentials::new(
            access_key_id,
            secret_access_key,
            session_token,
            None,
            "aquaregia",
        );
        Self {
            identity: credentials.into(),
            direct,
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

    /// The time to sign at.
    fn now(&self) -> SystemTime {
        self.time.unwrap_or_else(SystemTime::now)
    }

    /// The SigV4 headers of a request for `service`, from `aws-sigv4`'s general signer.
    pub(crate) fn sign_request(
        &self,
        service: &str,
        settings: SigningSettings,
        time: SystemTime,
        request: (&str, &str, &[(&str, &str)], &[u8]),
    ) -> Result<Vec<(HeaderName, HeaderValue)>, Error> {
        let (method, url, headers, body) = request;
        let params = v4::SigningParams::builder()
            .identity(&self.identity)
            .region(&self.region)
            .name(service)
            .time(time)
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
        Box::pin(std::future::ready(self.sign_post(
            self.now(),
            url,
            headers,
            body,
        )))
    }
}

impl SigV4Signer {
    /// The SigV4 headers of a POST of `body` to `url` with `headers`, signed at `time`.
    fn sign_post(
        &self,
        time: SystemTime,
        url: &Url,
        headers: &HeaderMap,
        body: &[u8],
    ) -> Result<Vec<(HeaderName, HeaderValue)>, Error> {
        // Only the content type is signed besides what SigV4 adds: other headers (proxies,
        // the HTTP client's own) may change on the way.
        let content_type = headers
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|value| value.to_str().ok());
        if let Some(headers) = self.direct.sign(time, "POST", url, content_type, body) {
            return Ok(headers);
        }
        let signed: Vec<(&str, &str)> = content_type
            .map(|value| ("content-type", value))
            .into_iter()
            .collect();
        let settings = SigningSettings::default();
        self.sign_request(
            SERVICE,
            settings,
            time,
            ("POST", url.as_str(), &signed, body),
        )
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
        let headers = signer
            .sign_request("service", settings, signer.now(), request)
            .unwrap();
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
            .sign_request("service", SigningSettings::default(), signer.now(), request)
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
        let url =
            Url::parse("https://bedrock-runtime.eu-west-3.amazonaws.com/model/m/converse").unwrap();
        let headers = signer
            .sign_post(signer.now(), &url, &json_headers(), b"{}")
            .unwrap();
        assert_eq!(header(&headers, "x-amz-security-token"), "token-value");
        assert!(header(&headers, "authorization").contains("/eu-west-3/bedrock/aws4_request"));
        assert!(!format!("{signer:?}").contains("secret-key-value"));
        assert!(!format!("{:?}", signer.direct).contains("secret-key-value"));
    }

    fn json_headers() -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(
            reqwest::header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        headers
    }

    /// 2015-08-30T12:36:00Z, the AWS suite's time, plus `seconds`.
    fn suite_time(seconds: i64) -> SystemTime {
        let base = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_440_938_160);
        match u64::try_from(seconds) {
            Ok(later) => base + std::time::Duration::from_secs(later),
            Err(_) => base - std::time::Duration::from_secs(seconds.unsigned_abs()),
        }
    }

    /// The suite's `get-vanilla`, `post-vanilla`, `get-unreserved` and
    /// `get-vanilla-with-session-token` cases, signed by the direct signer.
    #[test]
    fn the_direct_signer_passes_the_aws_test_suite() {
        let secret = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY";
        let token = "6e86291e8372ff2a2260956d9b8aae1d763fbf315fa00fa31553b73ebf194267";
        let plain = direct::DirectSigner::new("AKIDEXAMPLE", secret, None, "us-east-1", "service");
        let with_token =
            direct::DirectSigner::new("AKIDEXAMPLE", secret, Some(token), "us-east-1", "service");
        let unreserved = "/-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
        let cases = [
            (
                &plain,
                "GET",
                "/",
                "host;x-amz-date",
                "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31",
            ),
            (
                &plain,
                "POST",
                "/",
                "host;x-amz-date",
                "5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b",
            ),
            (
                &plain,
                "GET",
                unreserved,
                "host;x-amz-date",
                "07ef7494c76fa4850883e2b006601f940f8a34d404d0cfa977f52a65bbf5f24f",
            ),
            (
                &with_token,
                "GET",
                "/",
                "host;x-amz-date;x-amz-security-token",
                "07ec1639c89043aa0e3e2de82b96708f198cceab042d4a97044c66dd9f74e7f8",
            ),
        ];
        for (signer, method, path, signed, signature) in cases {
            let url = Url::parse(&format!("https://example.amazonaws.com{path}")).unwrap();
            let headers = signer.sign(suite_time(0), method, &url, None, b"").unwrap();
            assert_eq!(header(&headers, "x-amz-date"), "20150830T123600Z");
            assert_eq!(
                header(&headers, "authorization"),
                format!("{CREDENTIAL}, SignedHeaders={signed}, Signature={signature}"),
                "{method} {path}"
            );
        }
        assert_eq!(
            header(
                &with_token
                    .sign(
                        suite_time(0),
                        "GET",
                        &Url::parse("https://example.amazonaws.com/").unwrap(),
                        None,
                        b""
                    )
                    .unwrap(),
                "x-amz-security-token"
            ),
            token
        );
    }

    /// Every header as (name, value, sensitive), to compare byte for byte.
    fn exact(headers: &[(HeaderName, HeaderValue)]) -> Vec<(String, Vec<u8>, bool)> {
        headers
            .iter()
            .map(|(name, value)| {
                (
                    name.as_str().to_owned(),
                    value.as_bytes().to_vec(),
                    value.is_sensitive(),
                )
            })
            .collect()
    }

    /// The provider's requests, signed directly, carry exactly the headers `aws-sigv4`'s
    /// general signer gives them; the requests of other shapes are signed by `aws-sigv4`.
    #[test]
    fn the_provider_signs_byte_for_byte_like_aws_sigv4() {
        let models = [
            "m",
            "anthropic.claude-3:0",
            "us.anthropic.claude-sonnet-4-5-20250929-v1:0",
            "arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.anthropic.claude-3-5-sonnet-20240620-v1:0",
            "arn:aws:bedrock:eu-west-3:123456789012:provisioned-model/a b+c=d@e!f(g)h*i,j;k$l&m'n",
            "modèle/日本",
            "..",
            "a%2Fb",
        ];
        let bases = [
            "https://bedrock-runtime.us-east-1.amazonaws.com",
            "https://Bedrock-Runtime.EU-WEST-3.amazonaws.com/",
            "http://127.0.0.1:8080",
            "http://localhost:80",
            "https://bedrock-runtime.us-east-1.amazonaws.com:443",
            "https://bedrock-runtime.us-east-1.amazonaws.com:8443",
            "https://[::1]:9443",
            "https://proxy.example.com/aws/bedrock",
        ];
        // Shapes the direct signer leaves to aws-sigv4.
        let others = [
            "https://bedrock-runtime.us-east-1.amazonaws.com/model/m/converse?x=1&a=b%20c",
            "https://bedrock-runtime.us-east-1.amazonaws.com/model//converse",
            "https://user:pass@bedrock-runtime.us-east-1.amazonaws.com/model/m/converse",
            "https://bedrock-runtime.us-east-1.amazonaws.com/model/m/converse#part",
            "ftp://bedrock-runtime.us-east-1.amazonaws.com/model/m/converse",
        ];
        let mut urls: Vec<(String, bool)> = Vec::new();
        for base in bases {
            for model in models {
                for action in ["converse", "converse-stream"] {
                    let path = format!("/model/{}/{action}", crate::http::encode_component(model));
                    urls.push((format!("{}{path}", base.trim_end_matches('/')), true));
                }
            }
        }
        urls.extend(others.iter().map(|url| ((*url).to_owned(), false)));
        for url in ["/", "/model/m/converse/"] {
            urls.push((
                format!("https://bedrock-runtime.us-east-1.amazonaws.com{url}"),
                true,
            ));
        }
        let bodies: Vec<Vec<u8>> = [0usize, 1, 55, 56, 64, 1000, 70_000]
            .iter()
            .map(|len| (0..*len).map(|i| b"{\"ab c:\n}"[i % 9]).collect())
            .collect();
        // The last one SigV4 trims, so aws-sigv4 signs it.
        let content_types = [
            Some("application/json"),
            None,
            Some("application/json; charset=utf-8"),
            Some(" application/json;  charset=utf-8"),
        ];
        // Back and forth over days, months, a leap day and years.
        let times = [
            suite_time(0),
            suite_time(86_399 - 45_360),
            suite_time(86_400 - 45_360),
            suite_time(-45_361),
            suite_time(0),
            SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_709_164_799), // 2024-02-28T23:59:59Z
            SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_709_164_800), // 2024-02-29
            SystemTime::UNIX_EPOCH + std::time::Duration::from_millis(1_796_256_000_999), // 2026-12-02, with millis
            SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(4_102_444_799), // 2099-12-31T23:59:59Z
        ];
        let signers = [
            SigV4Signer::new(
                "AKIDEXAMPLE",
                "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
                None,
                "us-east-1",
            ),
            SigV4Signer::new(
                "ASIAEXAMPLE",
                "secret/with+slash=",
                Some("FwoGZXIvYXdzEBY//////////wEaDM+/token=".to_owned()),
                "eu-west-3",
            ),
            SigV4Signer::new("AKID2", "s", Some("t".to_owned()), "ap-southeast-2"),
        ];
        let mut direct = 0;
        let mut general = 0;
        for (case, (url, of_shape)) in urls.iter().enumerate() {
            let url = Url::parse(url).unwrap();
            let signer = &signers[case % signers.len()];
            for (index, body) in bodies.iter().enumerate() {
                let time = times[(case + index) % times.len()];
                let content_type = content_types[(case + index) % content_types.len()];
                let mut headers = HeaderMap::new();
                if let Some(value) = content_type {
                    headers.insert(
                        reqwest::header::CONTENT_TYPE,
                        HeaderValue::from_static(value),
                    );
                }
                let signed: Vec<(&str, &str)> = content_type
                    .map(|v| ("content-type", v))
                    .into_iter()
                    .collect();
                let expected = signer
                    .sign_request(
                        SERVICE,
                        SigningSettings::default(),
                        time,
                        ("POST", url.as_str(), &signed, body),
                    )
                    .unwrap();
                let by_direct = signer.direct.sign(time, "POST", &url, content_type, body);
                let trimmed = content_type.is_none_or(|value| !value.contains("  "));
                assert_eq!(by_direct.is_some(), *of_shape && trimmed, "{url}");
                if let Some(headers) = &by_direct {
                    assert_eq!(exact(headers), exact(&expected), "{url} {time:?}");
                    direct += 1;
                } else {
                    general += 1;
                }
                let provider = signer.sign_post(time, &url, &headers, body).unwrap();
                assert_eq!(exact(&provider), exact(&expected), "{url} {time:?}");
            }
        }
        assert!(
            direct > 600 && general > 200,
            "{direct} direct, {general} general"
        );
    }

    /// A signing key serves a day: it is derived again when the signing time reaches another
    /// day, and the signatures stay right on both sides.
    #[test]
    fn the_signing_key_is_derived_once_a_day() {
        let signer = SigV4Signer::new("AKID", "secret", None, "us-east-1");
        let url =
            Url::parse("https://bedrock-runtime.us-east-1.amazonaws.com/model/m/converse").unwrap();
        let day = |seconds: i64| suite_time(seconds - 45_360); // from 2015-08-30T00:00:00Z
        let sign = |time: SystemTime| {
            let expected = signer
                .sign_request(
                    SERVICE,
                    SigningSettings::default(),
                    time,
                    (
                        "POST",
                        url.as_str(),
                        &[("content-type", "application/json")],
                        b"{}",
                    ),
                )
                .unwrap();
            let signed = signer
                .sign_post(time, &url, &json_headers(), b"{}")
                .unwrap();
            assert_eq!(exact(&signed), exact(&expected), "{time:?}");
            signer.direct.derivations()
        };
        assert_eq!(sign(day(0)), 1);
        assert_eq!(sign(day(43_200)), 1);
        assert_eq!(sign(day(86_399)), 1);
        assert_eq!(sign(day(86_400)), 2, "a new day, a new key");
        assert_eq!(sign(day(86_400 + 3_600)), 2);
        assert_eq!(sign(day(86_399)), 3, "back to the day before");
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

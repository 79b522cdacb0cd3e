//! SigV4 written out directly for the requests the `bedrock` provider sends, instead of through
//! `aws-sigv4`'s general request model (which parses the URL again, builds a header map, and
//! derives the signing key with four HMACs on every call).
//!
//! The canonical request of such a request is short: the method, the URL's path (already
//! percent-encoded by `url`, encoded once more as SigV4 does for every service but S3), no
//! query, and the signed headers in order: `content-type` when the request has one, `host`,
//! `x-amz-date`, and `x-amz-security-token` with a session token. The signing key depends only
//! on the secret key, the day, the region and the service, so it is derived once a day and kept
//! as a keyed HMAC. Any request outside that shape (a query, a path that SigV4's normalisation
//! would change, user info in the URL, a header value SigV4 would trim) is left to
//! `aws-sigv4`: [`DirectSigner::sign`] answers `None` for it.
//!
//! The `sigv4` bench compiles this file on its own, so it names nothing else of the crate.

use std::sync::{Mutex, PoisonError};
use std::time::SystemTime;

use hmac::{Hmac, Mac};
use reqwest::Url;
use reqwest::header::{HeaderName, HeaderValue};
use sha2::{Digest, Sha256};
use time::{Date, OffsetDateTime};

type HmacSha256 = Hmac<Sha256>;

const ALGORITHM: &str = "AWS4-HMAC-SHA256";

/// Signs requests of the provider's shape for one set of credentials, region and service.
pub(crate) struct DirectSigner {
    access_key_id: String,
    secret_access_key: String,
    /// `x-amz-security-token`, marked sensitive; `None` without a session token.
    session_token: Option<HeaderValue>,
    /// A session token that is not a valid header value: `aws-sigv4` reports it.
    invalid_token: bool,
    region: String,
    service: String,
    /// The signing key of the last day signed for, keyed into an HMAC ready to sign.
    key: Mutex<Option<DayKey>>,
    /// How many signing keys were derived (tests check that one serves a whole day).
    #[cfg(test)]
    derivations: std::sync::atomic::AtomicUsize,
}

struct DayKey {
    date: Date,
    mac: HmacSha256,
}

impl std::fmt::Debug for DirectSigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DirectSigner")
            .field("region", &self.region)
            .field("service", &self.service)
            .finish_non_exhaustive()
    }
}

impl DirectSigner {
    /// A signer of these credentials for `region` and `service`.
    pub(crate) fn new(
        access_key_id: &str,
        secret_access_key: &str,
        session_token: Option<&str>,
        region: &str,
        service: &str,
    ) -> Self {
        let token = session_token.map(HeaderValue::from_str);
        let invalid_token = matches!(token, Some(Err(_)));
        let session_token = token.and_then(Result::ok).map(|mut value| {
            value.set_sensitive(true);
            value
        });
        Self {
            access_key_id: access_key_id.to_owned(),
            secret_access_key: secret_access_key.to_owned(),
            session_token,
            invalid_token,
            region: region.to_owned(),
            service: service.to_owned(),
            key: Mutex::new(None),
            #[cfg(test)]
            derivations: std::sync::atomic::AtomicUsize::new(0),
        }
    }

    /// The SigV4 headers (`x-amz-date`, `authorization`, and `x-amz-security-token` with a
    /// session token) of a `method` request of `body` to `url` whose only other signed header
    /// is `content_type`, signed at `time`; `None` when the request is not of the shape this
    /// signer writes, for `aws-sigv4` to sign.
    pub(crate) fn sign(
        &self,
        time: SystemTime,
        method: &str,
        url: &Url,
        content_type: Option<&str>,
        body: &[u8],
    ) -> Option<Vec<(HeaderName, HeaderValue)>> {
        if self.invalid_token
            || !matches!(url.scheme(), "http" | "https")
            || !url.username().is_empty()
            || url.password().is_some()
            || url.query().is_some()
            || url.fragment().is_some()
            || !is_normalized(url.path())
            || content_type.is_some_and(|value| !is_trimmed(value))
        {
            return None;
        }
        let host = url.host_str()?;
        let time = OffsetDateTime::from(time);
        let stamp = Stamp::new(time)?;
        let date_time = stamp.date_time();
        let date = stamp.date();

        let token = self.session_token.as_ref();
        let signed_headers = match (content_type.is_some(), token.is_some()) {
            (true, true) => "content-type;host;x-amz-date;x-amz-security-token",
            (true, false) => "content-type;host;x-amz-date",
            (false, true) => "host;x-amz-date;x-amz-security-token",
            (false, false) => "host;x-amz-date",
        };
        let path = url.path();
        let mut request = String::with_capacity(256 + 3 * path.len());
        request.push_str(method);
        request.push('\n');
        encode_path(path, &mut request);
        request.push_str("\n\n");
        if let Some(content_type) = content_type {
            request.push_str("content-type:");
            request.push_str(content_type);
            request.push('\n');
        }
        request.push_str("host:");
        request.push_str(host);
        if let Some(port) = url.port() {
            request.push(':');
            push_decimal(port, &mut request);
        }
        request.push_str("\nx-amz-date:");
        request.push_str(date_time);
        request.push('\n');
        if let Some(token) = token {
            request.push_str("x-amz-security-token:");
            request.push_str(token.to_str().ok()?);
            request.push('\n');
        }
        request.push('\n');
        request.push_str(signed_headers);
        request.push('\n');
        request.push_str(hex(&Sha256::digest(body)).as_str());
        let request_hash = hex(&Sha256::digest(request.as_bytes()));

        let mut mac = self.keyed_mac(time.date(), date)?;
        for part in [
            ALGORITHM,
            "\n",
            date_time,
            "\n",
            date,
            "/",
            &self.region,
            "/",
            &self.service,
            "/aws4_request\n",
            request_hash.as_str(),
        ] {
            mac.update(part.as_bytes());
        }
        let signature = hex(&mac.finalize().into_bytes());

        let mut authorization = String::with_capacity(160 + self.access_key_id.len());
        for part in [
            ALGORITHM,
            " Credential=",
            &self.access_key_id,
            "/",
            date,
            "/",
            &self.region,
            "/",
            &self.service,
            "/aws4_request, SignedHeaders=",
            signed_headers,
            ", Signature=",
            signature.as_str(),
        ] {
            authorization.push_str(part);
        }
        let mut authorization = HeaderValue::from_str(&authorization).ok()?;
        authorization.set_sensitive(true);
        let mut headers = Vec::with_capacity(3);
        headers.push((
            HeaderName::from_static("x-amz-date"),
            HeaderValue::from_str(date_time).ok()?,
        ));
        headers.push((HeaderName::from_static("authorization"), authorization));
        if let Some(token) = token {
            headers.push((
                HeaderName::from_static("x-amz-security-token"),
                token.clone(),
            ));
        }
        Some(headers)
    }

    /// An HMAC keyed with the signing key of `day` (`date` is it as `YYYYMMDD`), derived when
    /// the day changes: `HMAC(HMAC(HMAC(HMAC("AWS4" + secret, date), region), service),
    /// "aws4_request")`.
    fn keyed_mac(&self, day: Date, date: &str) -> Option<HmacSha256> {
        let mut cached = self.key.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(key) = cached.as_ref().filter(|key| key.date == day) {
            return Some(key.mac.clone());
        }
        let mut key = Vec::with_capacity(4 + self.secret_access_key.len());
        key.extend_from_slice(b"AWS4");
        key.extend_from_slice(self.secret_access_key.as_bytes());
        let mut tag = hmac(&key, date.as_bytes())?;
        for part in [self.region.as_str(), self.service.as_str(), "aws4_request"] {
            tag = hmac(&tag, part.as_bytes())?;
        }
        let mac = keyed(&tag)?;
        *cached = Some(DayKey {
            date: day,
            mac: mac.clone(),
        });
        #[cfg(test)]
        self.derivations
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Some(mac)
    }

    /// How many signing keys this signer derived.
    #[cfg(test)]
    pub(crate) fn derivations(&self) -> usize {
        self.derivations.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// An HMAC-SHA256 keyed with `key` (HMAC takes keys of any length: never `None`).
fn keyed(key: &[u8]) -> Option<HmacSha256> {
    HmacSha256::new_from_slice(key).ok()
}

fn hmac(key: &[u8], data: &[u8]) -> Option<Vec<u8>> {
    let mut mac = keyed(key)?;
    mac.update(data);
    Some(mac.finalize().into_bytes().to_vec())
}

/// `value` in decimal.
fn push_decimal(value: u16, out: &mut String) {
    let mut digits = [0u8; 5];
    let mut start = digits.len();
    let mut rest = value;
    loop {
        start -= 1;
        digits[start] = b'0' + (rest % 10) as u8;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    for digit in &digits[start..] {
        out.push(char::from(*digit));
    }
}

/// `x-amz-date` (`YYYYMMDD'T'HHMMSS'Z'`, UTC), whose first 8 bytes are the date.
struct Stamp([u8; 16]);

impl Stamp {
    /// `None` for a year SigV4's 4-digit form does not hold.
    fn new(time: OffsetDateTime) -> Option<Self> {
        let year = u16::try_from(time.year())
            .ok()
            .filter(|year| *year <= 9999)?;
        let mut out = *b"00000000T000000Z";
        let mut put = |at: usize, value: u16, digits: usize| {
            let mut value = value;
            for index in (at..at + digits).rev() {
                out[index] = b'0' + (value % 10) as u8;
                value /= 10;
            }
        };
        put(0, year, 4);
        put(4, u16::from(u8::from(time.month())), 2);
        put(6, u16::from(time.day()), 2);
        put(9, u16::from(time.hour()), 2);
        put(11, u16::from(time.minute()), 2);
        put(13, u16::from(time.second()), 2);
        Some(Self(out))
    }

    fn date_time(&self) -> &str {
        // Only ASCII digits and letters were written.
        std::str::from_utf8(&self.0).unwrap_or_default()
    }

    fn date(&self) -> &str {
        self.date_time().get(..8).unwrap_or_default()
    }
}

/// Whether SigV4's path normalisation (RFC 3986 dot segments, empty segments dropped) leaves
/// `path` as it is: no `.` or `..` segment and no empty one but a trailing slash's.
fn is_normalized(path: &str) -> bool {
    let Some(rest) = path.strip_prefix('/') else {
        return false;
    };
    let mut segments = rest.split('/').peekable();
    while let Some(segment) = segments.next() {
        let last = segments.peek().is_none();
        if segment == "." || segment == ".." || (segment.is_empty() && !last) {
            return false;
        }
    }
    true
}

/// Whether SigV4's header value normalisation (spaces trimmed, runs of spaces made one)
/// leaves `value` as it is.
fn is_trimmed(value: &str) -> bool {
    !value.starts_with(' ') && !value.ends_with(' ') && !value.contains("  ")
}

/// `path` percent-encoded as SigV4 writes a canonical URI: every byte but the unreserved
/// characters and `/` as `%XY` (so the `%` of the URL's own escapes becomes `%25`).
fn encode_path(path: &str, out: &mut String) {
    const DIGITS: &[u8; 16] = b"0123456789ABCDEF";
    for byte in path.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~' | b'/') {
            out.push(char::from(byte));
        } else {
            out.push('%');
            out.push(char::from(DIGITS[usize::from(byte >> 4)]));
            out.push(char::from(DIGITS[usize::from(byte & 0x0f)]));
        }
    }
}

/// Lower-case hex of a digest, as SigV4 writes hashes and signatures.
fn hex(bytes: &[u8]) -> HexString {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = [0u8; 64];
    for (index, byte) in bytes.iter().take(32).enumerate() {
        out[2 * index] = DIGITS[usize::from(byte >> 4)];
        out[2 * index + 1] = DIGITS[usize::from(byte & 0x0f)];
    }
    HexString(out)
}

/// The 64 hex digits of a SHA-256 digest, on the stack.
struct HexString([u8; 64]);

impl HexString {
    fn as_str(&self) -> &str {
        // Only hex digits were written.
        std::str::from_utf8(&self.0).unwrap_or_default()
    }
}

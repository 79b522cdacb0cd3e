//! Wall-clock timestamps for session metadata, in RFC 3339 through the `time` crate.

use std::fmt;
use std::str::FromStr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use ::time::OffsetDateTime;
use ::time::format_description::well_known::Rfc3339;

use serde::{Deserialize, Serialize};

/// A point in time with millisecond precision, stored as milliseconds since the Unix epoch.
///
/// `Display` prints RFC 3339 in UTC (`2026-12-01T09:27:38.123Z`), the form ACP's `updatedAt`
/// and most databases accept.
///
/// ```
/// use aquaregia::Timestamp;
/// assert_eq!(Timestamp::from_millis(0).to_string(), "1970-01-01T00:00:00.000Z");
/// ```
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct Timestamp(u64);

impl Timestamp {
    /// The current time.
    pub fn now() -> Self {
        Self::from(SystemTime::now())
    }

    /// A timestamp from milliseconds since the Unix epoch.
    pub const fn from_millis(millis: u64) -> Self {
        Self(millis)
    }

    /// Milliseconds since the Unix epoch.
    pub const fn as_millis(self) -> u64 {
        self.0
    }

    /// This timestamp as a [`SystemTime`].
    pub fn to_system_time(self) -> SystemTime {
        UNIX_EPOCH + Duration::from_millis(self.0)
    }
}

impl From<SystemTime> for Timestamp {
    fn from(time: SystemTime) -> Self {
        let millis = time.duration_since(UNIX_EPOCH).map_or(0, |elapsed| {
            u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX)
        });
        Self(millis)
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Always three fraction digits in UTC, so the text sorts as the time does.
        let nanos = i128::from(self.0) * 1_000_000;
        match OffsetDateTime::from_unix_timestamp_nanos(nanos) {
            Ok(time) => write!(
                f,
                "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z",
                time.year(),
                u8::from(time.month()),
                time.day(),
                time.hour(),
                time.minute(),
                time.second(),
                time.millisecond()
            ),
            // Past year 9999: no RFC 3339 form; the raw count still says when.
            Err(_) => write!(f, "@{}ms", self.0),
        }
    }
}

/// Why a text is not an RFC 3339 timestamp (or is one before the Unix epoch).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not an RFC 3339 timestamp at or after 1970-01-01T00:00:00Z: {0}")]
pub struct TimestampParseError(String);

impl FromStr for Timestamp {
    type Err = TimestampParseError;

    /// Parses RFC 3339 with any offset (`2026-12-01T10:27:38.123+01:00`); precision past the
    /// millisecond is dropped.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let time = OffsetDateTime::parse(text, &Rfc3339)
            .map_err(|error| TimestampParseError(format!("`{text}`: {error}")))?;
        let millis = time.unix_timestamp_nanos() / 1_000_000;
        u64::try_from(millis)
            .map(Self)
            .map_err(|_| TimestampParseError(format!("`{text}` is before the Unix epoch")))
    }
}

#[cfg(test)]
mod tests {
    use super::Timestamp;

    #[test]
    fn formats_known_dates_as_rfc3339() {
        assert_eq!(
            Timestamp::from_millis(951_782_400_000).to_string(),
            "2000-02-29T00:00:00.000Z"
        );
        assert_eq!(
            Timestamp::from_millis(1_796_117_258_123).to_string(),
            "2026-12-01T09:27:38.123Z"
        );
        assert_eq!(
            Timestamp::from_millis(1_796_117_258_000).to_string(),
            "2026-12-01T09:27:38.000Z"
        );
    }

    #[test]
    fn parses_what_it_prints_and_other_offsets() {
        let time = Timestamp::from_millis(1_796_117_258_123);
        assert_eq!(time.to_string().parse::<Timestamp>(), Ok(time));
        assert_eq!(
            "2026-12-01T10:27:38.123456+01:00".parse::<Timestamp>(),
            Ok(time)
        );
        assert!("1969-12-31T23:59:59Z".parse::<Timestamp>().is_err());
        assert!("yesterday".parse::<Timestamp>().is_err());
    }
}

//! The wire formats of a remaining budget: `grpc-timeout`, `connect-timeout-ms`,
//! `x-envoy-expected-rq-timeout-ms`, or a named header of decimal milliseconds.

use std::fmt;
use std::time::Duration;

use http::header::{HeaderMap, HeaderName, HeaderValue};

/// How a budget is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Format {
    /// gRPC over HTTP/2: 1 to 8 ASCII digits, then one unit of `H M S m u n`.
    Grpc,
    /// Decimal milliseconds, at most `max_digits` ASCII digits.
    Millis { max_digits: u8 },
}

/// The most digits a `grpc-timeout` value may have (the gRPC HTTP/2 spec).
const GRPC_DIGITS: u8 = 8;
/// The most digits of `connect-timeout-ms` (the Connect protocol).
const CONNECT_DIGITS: u8 = 10;
/// The most digits of the other millisecond headers: 19 digits always fit in a `u64`.
const MILLIS_DIGITS: u8 = 19;

/// A header that carries a remaining budget, and its format: parses a value into a
/// [`Duration`] and encodes a `Duration` into a value.
///
/// * [`grpc_timeout`](Self::grpc_timeout): `grpc-timeout`, 1 to 8 ASCII digits and one unit of
///   `H` (hours), `M` (minutes), `S`, `m` (milliseconds), `u` (microseconds) or
///   `n` (nanoseconds), as the gRPC HTTP/2 spec says;
/// * [`connect_timeout_ms`](Self::connect_timeout_ms): `connect-timeout-ms`, at most 10
///   digits of milliseconds (the Connect protocol);
/// * [`envoy_expected_rq_timeout_ms`](Self::envoy_expected_rq_timeout_ms):
///   `x-envoy-expected-rq-timeout-ms`, decimal milliseconds (at most 19 digits);
/// * [`millis`](Self::millis): a header you name, decimal milliseconds (at most 19 digits).
///
/// Parsing is strict: no sign, no spaces, no fraction, only ASCII digits (leading zeros are
/// digits too); anything else is a [`BudgetError`], and no input panics. Encoding rounds
/// **down**, so the budget sent never exceeds the one given; a budget too large for the format
/// is sent as the format's largest value.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use http::HeaderValue;
/// use shared_headers::deadline::{BudgetError, BudgetHeader};
///
/// let grpc = BudgetHeader::grpc_timeout();
/// assert_eq!(grpc.parse(&HeaderValue::from_static("250m")), Ok(Duration::from_millis(250)));
/// assert_eq!(grpc.parse(&HeaderValue::from_static("-1S")), Err(BudgetError::Signed));
/// assert_eq!(grpc.encode(Duration::from_millis(1500)), "1500000u");
///
/// let envoy = BudgetHeader::envoy_expected_rq_timeout_ms();
/// assert_eq!(envoy.encode(Duration::from_micros(1999)), "1"); // rounded down
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct BudgetHeader {
    name: HeaderName,
    format: Format,
}

impl BudgetHeader {
    /// `grpc-timeout` (gRPC over HTTP/2): `1` to `99999999` then a unit of `H M S m u n`.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use http::HeaderValue;
    /// # use shared_headers::deadline::BudgetHeader;
    /// let grpc = BudgetHeader::grpc_timeout();
    /// assert_eq!(grpc.name(), "grpc-timeout");
    /// assert_eq!(grpc.parse(&HeaderValue::from_static("2H")), Ok(Duration::from_secs(7200)));
    /// ```
    pub fn grpc_timeout() -> BudgetHeader {
        BudgetHeader {
            name: HeaderName::from_static("grpc-timeout"),
            format: Format::Grpc,
        }
    }

    /// `connect-timeout-ms` (the Connect protocol): at most 10 digits of milliseconds.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use http::HeaderValue;
    /// # use shared_headers::deadline::{BudgetError, BudgetHeader};
    /// let connect = BudgetHeader::connect_timeout_ms();
    /// assert_eq!(connect.parse(&HeaderValue::from_static("300")), Ok(Duration::from_millis(300)));
    /// let eleven = HeaderValue::from_static("12345678901");
    /// assert_eq!(connect.parse(&eleven), Err(BudgetError::TooManyDigits { max: 10 }));
    /// ```
    pub fn connect_timeout_ms() -> BudgetHeader {
        BudgetHeader {
            name: HeaderName::from_static("connect-timeout-ms"),
            format: Format::Millis {
                max_digits: CONNECT_DIGITS,
            },
        }
    }

    /// `x-envoy-expected-rq-timeout-ms` (what Envoy tells the upstream): decimal milliseconds.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use http::HeaderValue;
    /// # use shared_headers::deadline::BudgetHeader;
    /// let envoy = BudgetHeader::envoy_expected_rq_timeout_ms();
    /// assert_eq!(envoy.name(), "x-envoy-expected-rq-timeout-ms");
    /// assert_eq!(envoy.parse(&HeaderValue::from_static("15000")), Ok(Duration::from_secs(15)));
    /// ```
    pub fn envoy_expected_rq_timeout_ms() -> BudgetHeader {
        BudgetHeader {
            name: HeaderName::from_static("x-envoy-expected-rq-timeout-ms"),
            format: Format::Millis {
                max_digits: MILLIS_DIGITS,
            },
        }
    }

    /// A header you name, holding decimal milliseconds (at most 19 digits).
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use http::{HeaderName, HeaderValue};
    /// # use shared_headers::deadline::BudgetHeader;
    /// let budget = BudgetHeader::millis(HeaderName::from_static("x-budget-ms"));
    /// assert_eq!(budget.encode(Duration::from_millis(42)), "42");
    /// ```
    pub fn millis(name: HeaderName) -> BudgetHeader {
        BudgetHeader {
            name,
            format: Format::Millis {
                max_digits: MILLIS_DIGITS,
            },
        }
    }

    /// The header's name.
    ///
    /// # Examples
    ///
    /// ```
    /// # use shared_headers::deadline::BudgetHeader;
    /// assert_eq!(BudgetHeader::connect_timeout_ms().name(), "connect-timeout-ms");
    /// ```
    pub fn name(&self) -> &HeaderName {
        &self.name
    }

    /// The smallest budget the format can express above zero (1 ns for `grpc-timeout`, 1 ms
    /// for the millisecond formats): a budget below it is sent as zero.
    #[cfg_attr(not(feature = "client"), allow(dead_code))]
    pub(crate) fn resolution(&self) -> Duration {
        match self.format {
            Format::Grpc => Duration::from_nanos(1),
            Format::Millis { .. } => Duration::from_millis(1),
        }
    }

    /// Parses a value of this header.
    ///
    /// # Errors
    ///
    /// A [`BudgetError`] saying what is wrong with the value; see the variants.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use http::HeaderValue;
    /// # use shared_headers::deadline::{BudgetError, BudgetHeader};
    /// let grpc = BudgetHeader::grpc_timeout();
    /// assert_eq!(grpc.parse(&HeaderValue::from_static("0m")), Ok(Duration::ZERO));
    /// assert_eq!(grpc.parse(&HeaderValue::from_static("123456789S")), Err(BudgetError::TooManyDigits { max: 8 }));
    /// assert_eq!(grpc.parse(&HeaderValue::from_static("1.5S")), Err(BudgetError::NotDigits));
    /// assert_eq!(grpc.parse(&HeaderValue::from_static("5")), Err(BudgetError::MissingUnit));
    /// assert_eq!(grpc.parse(&HeaderValue::from_static("5s")), Err(BudgetError::UnknownUnit));
    /// ```
    pub fn parse(&self, value: &HeaderValue) -> Result<Duration, BudgetError> {
        let bytes = value.as_bytes();
        match self.format {
            Format::Grpc => {
                let Some((&unit, digits)) = bytes.split_last() else {
                    return Err(BudgetError::Empty);
                };
                let nanos_per: u64 = match unit {
                    b'H' => 3_600_000_000_000,
                    b'M' => 60_000_000_000,
                    b'S' => 1_000_000_000,
                    b'm' => 1_000_000,
                    b'u' => 1_000,
                    b'n' => 1,
                    b'0'..=b'9' => return Err(BudgetError::MissingUnit),
                    _ => return Err(BudgetError::UnknownUnit),
                };
                let n = parse_digits(digits, GRPC_DIGITS)?;
                // At most 99,999,999 H = 3.6e20 ns: beyond u64 nanoseconds, so in u128.
                let nanos = u128::from(n) * u128::from(nanos_per);
                Ok(duration_from_nanos(nanos))
            }
            Format::Millis { max_digits } => {
                parse_digits(bytes, max_digits).map(Duration::from_millis)
            }
        }
    }

    /// Parses this header from `headers`: `None` if it is absent, else the first value parsed.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use http::HeaderMap;
    /// # use shared_headers::deadline::BudgetHeader;
    /// let grpc = BudgetHeader::grpc_timeout();
    /// let mut headers = HeaderMap::new();
    /// assert_eq!(grpc.parse_from(&headers), None);
    /// headers.insert("grpc-timeout", "30S".parse()?);
    /// assert_eq!(grpc.parse_from(&headers), Some(Ok(Duration::from_secs(30))));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn parse_from(&self, headers: &HeaderMap) -> Option<Result<Duration, BudgetError>> {
        headers.get(&self.name).map(|value| self.parse(value))
    }

    /// Encodes `budget`, rounded down so that it never exceeds `budget`.
    ///
    /// `grpc-timeout` takes the finest unit in which the value fits in 8 digits (nanoseconds
    /// below 0.1 s, microseconds below 100 s, ...); the millisecond formats drop the fraction of
    /// a millisecond. A budget beyond the format's largest value is sent as that value.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use shared_headers::deadline::BudgetHeader;
    /// let grpc = BudgetHeader::grpc_timeout();
    /// assert_eq!(grpc.encode(Duration::from_nanos(99_999_999)), "99999999n");
    /// assert_eq!(grpc.encode(Duration::from_millis(100)), "100000u");
    /// assert_eq!(grpc.encode(Duration::MAX), "99999999H");
    /// assert_eq!(BudgetHeader::connect_timeout_ms().encode(Duration::MAX), "9999999999");
    /// ```
    pub fn encode(&self, budget: Duration) -> HeaderValue {
        match self.format {
            Format::Grpc => {
                const UNITS: [(u64, u8); 6] = [
                    (1, b'n'),
                    (1_000, b'u'),
                    (1_000_000, b'm'),
                    (1_000_000_000, b'S'),
                    (60_000_000_000, b'M'),
                    (3_600_000_000_000, b'H'),
                ];
                const MAX: u64 = 99_999_999;
                // In `u64` nanoseconds (up to 584 years) the divisions by constants are
                // multiplications; a longer budget is whole hours whatever the rest.
                let (value, unit) = match u64::try_from(budget.as_nanos()) {
                    Ok(nanos) => UNITS
                        .iter()
                        .map(|&(per, unit)| (nanos / per, unit))
                        .find(|&(value, _)| value <= MAX)
                        .unwrap_or((MAX, b'H')),
                    Err(_) => ((budget.as_secs() / 3600).min(MAX), b'H'),
                };
                // At most 8 digits and the unit, written from the end of a buffer on the stack:
                // one allocation (the value's own), none to grow.
                let mut text = [0u8; GRPC_DIGITS as usize + 1];
                let mut at = text.len() - 1;
                text[at] = unit;
                let mut rest = value;
                loop {
                    at -= 1;
                    text[at] = b'0' + (rest % 10) as u8;
                    rest /= 10;
                    if rest == 0 {
                        break;
                    }
                }
                HeaderValue::from_bytes(&text[at..])
                    .unwrap_or_else(|_| HeaderValue::from_static("0n"))
            }
            Format::Millis { max_digits } => {
                let value = budget.as_millis().min(max_value(max_digits));
                HeaderValue::from(u64::try_from(value).unwrap_or(u64::MAX))
            }
        }
    }
}

/// The largest number of `digits` decimal digits.
fn max_value(digits: u8) -> u128 {
    10u128.pow(u32::from(digits)) - 1
}

/// Nanoseconds as a `Duration` (at most 3.6e20 ns, about 1.1e13 s: well within `Duration`).
fn duration_from_nanos(nanos: u128) -> Duration {
    let secs = u64::try_from(nanos / 1_000_000_000).unwrap_or(u64::MAX);
    // The remainder is below 1e9.
    let sub = u32::try_from(nanos % 1_000_000_000).unwrap_or(0);
    Duration::new(secs, sub)
}

/// 1 to `max` ASCII digits as a number (`max` <= 19, so it fits in a `u64`).
fn parse_digits(digits: &[u8], max: u8) -> Result<u64, BudgetError> {
    match digits.first() {
        None => return Err(BudgetError::Empty),
        Some(b'+' | b'-') => return Err(BudgetError::Signed),
        Some(_) => {}
    }
    if !digits.iter().all(u8::is_ascii_digit) {
        return Err(BudgetError::NotDigits);
    }
    if digits.len() > usize::from(max) {
        return Err(BudgetError::TooManyDigits { max });
    }
    let mut n: u64 = 0;
    for &d in digits {
        n = n
            .checked_mul(10)
            .and_then(|n| n.checked_add(u64::from(d - b'0')))
            .ok_or(BudgetError::TooManyDigits { max })?;
    }
    Ok(n)
}

/// Why a budget header's value was refused (see [`BudgetHeader::parse`]).
///
/// # Examples
///
/// ```
/// use http::HeaderValue;
/// use shared_headers::deadline::{BudgetError, BudgetHeader};
///
/// let err = BudgetHeader::grpc_timeout().parse(&HeaderValue::from_static("5 S")).unwrap_err();
/// assert_eq!(err, BudgetError::NotDigits);
/// assert_eq!(err.to_string(), "budget header: not ASCII digits");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum BudgetError {
    /// No digits: an empty value, or a `grpc-timeout` unit alone.
    Empty,
    /// A leading `+` or `-`: budgets are unsigned.
    Signed,
    /// Something other than ASCII digits where digits belong: a space, a `.`, non-ASCII bytes.
    NotDigits,
    /// More digits than the format allows (8 for `grpc-timeout`, 10 for `connect-timeout-ms`,
    /// 19 for the other millisecond headers).
    TooManyDigits {
        /// The most digits the format allows.
        max: u8,
    },
    /// A `grpc-timeout` value without its unit.
    MissingUnit,
    /// A `grpc-timeout` unit that is not one of `H M S m u n`.
    UnknownUnit,
}

impl fmt::Display for BudgetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("budget header: ")?;
        match self {
            BudgetError::Empty => f.write_str("no digits"),
            BudgetError::Signed => f.write_str("a sign before the digits"),
            BudgetError::NotDigits => f.write_str("not ASCII digits"),
            BudgetError::TooManyDigits { max } => write!(f, "more than {max} digits"),
            BudgetError::MissingUnit => f.write_str("no unit"),
            BudgetError::UnknownUnit => f.write_str("a unit other than H, M, S, m, u, n"),
        }
    }
}

impl std::error::Error for BudgetError {}

#[cfg(test)]
mod tests {
    use super::*;

    fn all() -> [BudgetHeader; 4] {
        [
            BudgetHeader::grpc_timeout(),
            BudgetHeader::connect_timeout_ms(),
            BudgetHeader::envoy_expected_rq_timeout_ms(),
            BudgetHeader::millis(HeaderName::from_static("x-budget-ms")),
        ]
    }

    fn p(h: &BudgetHeader, s: &[u8]) -> Result<Duration, BudgetError> {
        h.parse(&HeaderValue::from_bytes(s).unwrap())
    }

    #[test]
    fn grpc_units_and_boundaries() {
        let g = BudgetHeader::grpc_timeout();
        assert_eq!(p(&g, b"1H"), Ok(Duration::from_secs(3600)));
        assert_eq!(p(&g, b"2M"), Ok(Duration::from_secs(120)));
        assert_eq!(p(&g, b"3S"), Ok(Duration::from_secs(3)));
        assert_eq!(p(&g, b"4m"), Ok(Duration::from_millis(4)));
        assert_eq!(p(&g, b"5u"), Ok(Duration::from_micros(5)));
        assert_eq!(p(&g, b"6n"), Ok(Duration::from_nanos(6)));
        assert_eq!(p(&g, b"0m"), Ok(Duration::ZERO));
        assert_eq!(p(&g, b"00000001S"), Ok(Duration::from_secs(1)));
        assert_eq!(
            p(&g, b"99999999H"),
            Ok(Duration::from_secs(99_999_999 * 3600))
        );
        assert_eq!(
            p(&g, b"999999999H"),
            Err(BudgetError::TooManyDigits { max: 8 })
        );
        assert_eq!(p(&g, b"+5S"), Err(BudgetError::Signed));
        assert_eq!(p(&g, b"-1S"), Err(BudgetError::Signed));
        assert_eq!(p(&g, b" 5S"), Err(BudgetError::NotDigits));
        assert_eq!(p(&g, b"5 S"), Err(BudgetError::NotDigits));
        assert_eq!(p(&g, b"5S "), Err(BudgetError::UnknownUnit));
        assert_eq!(p(&g, b"1.5S"), Err(BudgetError::NotDigits));
        assert_eq!(p(&g, "５S".as_bytes()), Err(BudgetError::NotDigits));
        assert_eq!(p(&g, "5µ".as_bytes()), Err(BudgetError::UnknownUnit));
        assert_eq!(p(&g, b""), Err(BudgetError::Empty));
        assert_eq!(p(&g, b"S"), Err(BudgetError::Empty));
        assert_eq!(p(&g, b"12"), Err(BudgetError::MissingUnit));
        assert_eq!(p(&g, b"1h"), Err(BudgetError::UnknownUnit));
    }

    #[test]
    fn millis_forms_and_boundaries() {
        let c = BudgetHeader::connect_timeout_ms();
        assert_eq!(p(&c, b"0"), Ok(Duration::ZERO));
        assert_eq!(
            p(&c, b"9999999999"),
            Ok(Duration::from_millis(9_999_999_999))
        );
        assert_eq!(
            p(&c, b"10000000000"),
            Err(BudgetError::TooManyDigits { max: 10 })
        );
        let e = BudgetHeader::envoy_expected_rq_timeout_ms();
        assert_eq!(
            p(&e, b"9999999999999999999"),
            Ok(Duration::from_millis(9_999_999_999_999_999_999))
        );
        assert_eq!(
            p(&e, b"18446744073709551615"),
            Err(BudgetError::TooManyDigits { max: 19 })
        );
        for h in &all()[1..] {
            assert_eq!(p(h, b"250"), Ok(Duration::from_millis(250)));
            assert_eq!(p(h, b"-1"), Err(BudgetError::Signed));
            assert_eq!(p(h, b"+1"), Err(BudgetError::Signed));
            assert_eq!(p(h, b"1.5"), Err(BudgetError::NotDigits));
            assert_eq!(p(h, b"1 "), Err(BudgetError::NotDigits));
            assert_eq!(p(h, b"5S"), Err(BudgetError::NotDigits));
            assert_eq!(p(h, b""), Err(BudgetError::Empty));
            assert_eq!(p(h, "١".as_bytes()), Err(BudgetError::NotDigits));
        }
    }

    #[test]
    fn parse_from_absent_and_present() {
        let mut headers = HeaderMap::new();
        for h in all() {
            assert_eq!(h.parse_from(&headers), None);
            headers.insert(h.name().clone(), HeaderValue::from_static("x"));
            assert!(matches!(h.parse_from(&headers), Some(Err(_))));
        }
    }

    #[test]
    fn encode_picks_the_unit_and_rounds_down() {
        let g = BudgetHeader::grpc_timeout();
        assert_eq!(g.encode(Duration::ZERO), "0n");
        assert_eq!(g.encode(Duration::from_nanos(99_999_999)), "99999999n");
        assert_eq!(g.encode(Duration::from_nanos(100_000_001)), "100000u");
        assert_eq!(g.encode(Duration::from_secs(100)), "100000m");
        assert_eq!(g.encode(Duration::from_secs(100_000)), "100000S");
        assert_eq!(
            g.encode(Duration::from_secs(99_999_999 * 3600)),
            "99999999H"
        );
        assert_eq!(g.encode(Duration::MAX), "99999999H");
        let c = BudgetHeader::connect_timeout_ms();
        assert_eq!(c.encode(Duration::from_micros(999)), "0");
        assert_eq!(c.encode(Duration::from_micros(1_999)), "1");
        assert_eq!(c.encode(Duration::MAX), "9999999999");
        let e = BudgetHeader::envoy_expected_rq_timeout_ms();
        assert_eq!(e.encode(Duration::MAX), "9999999999999999999");
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "an exhaustive sweep, minutes under Miri; the parser is safe single-threaded code"
    )]
    fn every_short_value_parses_or_errs_and_round_trips() {
        // The fuzz target's property, exhaustively over short values of a telling alphabet.
        let alphabet: &[u8] = b"0189HMSmun+- .x\xff";
        let mut values: Vec<Vec<u8>> = vec![Vec::new()];
        for _ in 0..3 {
            let longer: Vec<Vec<u8>> = values
                .iter()
                .flat_map(|v| alphabet.iter().map(move |&b| [v.as_slice(), &[b]].concat()))
                .collect();
            values.extend(longer);
        }
        values.sort();
        values.dedup();
        for h in all() {
            for bytes in &values {
                let Ok(value) = HeaderValue::from_bytes(bytes) else {
                    continue;
                };
                if let Ok(d) = h.parse(&value) {
                    assert!(h.parse(&h.encode(d)).unwrap() <= d, "{h:?} {bytes:?}");
                }
            }
        }
    }

    #[test]
    fn grpc_units_either_side_of_u64_nanoseconds() {
        // The encoder works in `u64` nanoseconds and in whole hours beyond: the same answer on
        // both sides of the switch, and the finest unit that fits in 8 digits below it.
        let grpc = BudgetHeader::grpc_timeout();
        let last = Duration::from_nanos(u64::MAX);
        assert_eq!(grpc.encode(last), "5124095H");
        assert_eq!(grpc.encode(last + Duration::from_nanos(1)), "5124095H");
        assert_eq!(
            grpc.encode(Duration::from_secs(99_999_999 * 3600 + 3599)),
            "99999999H"
        );
        assert_eq!(
            grpc.encode(Duration::from_secs(100_000_000 * 3600)),
            "99999999H"
        );
        assert_eq!(grpc.encode(Duration::from_nanos(0)), "0n");
        assert_eq!(grpc.encode(Duration::from_nanos(100_000_000)), "100000u");
        assert_eq!(grpc.encode(Duration::from_secs(100_000_000)), "1666666M");
        assert_eq!(grpc.encode(Duration::from_millis(123_456_789)), "123456S");
    }

    #[test]
    fn round_trip_never_longer_than_the_input() {
        let mut samples = vec![Duration::ZERO, Duration::MAX, Duration::from_nanos(1)];
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        for shift in 0..64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            samples.push(Duration::from_nanos(x >> (shift % 64)));
            samples.push(Duration::new(x >> (shift % 64), (x % 1_000_000_000) as u32));
        }
        for h in all() {
            for &d in &samples {
                let back = h.parse(&h.encode(d)).unwrap();
                assert!(back <= d, "{h:?}: {d:?} -> {back:?}");
                // Within one unit of the chosen precision when not clamped: at least 99.99%.
                if d < Duration::from_secs(1_000_000) && d >= Duration::from_secs(1) {
                    assert!(
                        back.as_nanos() * 10_000 >= d.as_nanos() * 9_990,
                        "{h:?} {d:?}"
                    );
                }
            }
        }
    }
}

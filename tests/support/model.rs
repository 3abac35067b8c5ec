//! The one model of `SharedHeaders`, shared by its three drivers: `tests/differential.rs`
//! (deterministic seeds), `tests/proptest_model.rs` (random configurations, shrinking) and the
//! fuzz target `fuzz/fuzz_targets/ops.rs` (coverage-guided). It is an operation language
//! covering every write and read of `SharedHeaders`, and [`run`], which plays a sequence on a
//! handle (through two clones, alternately) and on a plain `HeaderMap` oracle side by side and
//! panics at the first disagreement.
//!
//! Properties checked after every operation:
//! * every read (`get`, `get_all`, `contains_key`, `len`, `is_empty`, `read`, `version`,
//!   `is_sealed`, `snapshot`, `draft`) of both clones agrees with the oracle, for the last name
//!   touched and every name of [`POOL`]; a snapshot iterates in the oracle's exact order (names
//!   and multi-values);
//! * every write returns exactly the oracle's answer, including `Sealed`, `Conflict`,
//!   `MaxSizeReached` and `LimitExceeded`, and a refused write publishes nothing;
//! * the version grows by exactly one per published change and never otherwise;
//! * snapshots taken earlier never change, their seal included (checked after every step);
//! * a `Reader` kept across all steps agrees with the oracle after every step;
//! * all of this with either publication (`Config::locked`: `Publication::Locked` or the default);
//! * every value of a secret name is flagged sensitive; `Debug`
//!   and `redacted()` never print a secret value;
//! * no method panics on any input.

#![allow(dead_code)]

use http::HeaderMap;
use http::header::{HeaderName, HeaderValue};
use shared_headers::{Error, Limit, SharedHeaders, Snapshot};

/// Names that collide often, including the default secrets and a configurable one.
pub const POOL: &[&str] = &[
    "host",
    "x-a",
    "x-b",
    "authorization",
    "cookie",
    "set-cookie",
    "x-api-key",
    "x-dup",
];

/// One edit of a map, inside a closure, a draft or a replacement map.
#[derive(Debug, Clone)]
pub enum Edit {
    Insert(HeaderName, HeaderValue),
    Append(HeaderName, HeaderValue),
    Remove(HeaderName),
}

/// Applies edits the way a careful closure does (`try_*`), stopping at the first full-map error.
pub fn apply(map: &mut HeaderMap, edits: &[Edit]) -> Result<(), http::header::MaxSizeReached> {
    for e in edits {
        match e {
            Edit::Insert(n, v) => drop(map.try_insert(n.clone(), v.clone())?),
            Edit::Append(n, v) => drop(map.try_append(n.clone(), v.clone())?),
            Edit::Remove(n) => drop(map.remove(n)),
        }
    }
    Ok(())
}

/// One step of a sequence.
#[derive(Debug, Clone)]
pub enum Op {
    Insert(HeaderName, HeaderValue),
    Append(HeaderName, HeaderValue),
    Remove(HeaderName),
    Update(Vec<Edit>),
    Replace(Vec<Edit>),
    /// Take a draft, edit it, optionally let another write in, then commit.
    DraftCommit {
        edits: Vec<Edit>,
        interleave: Option<(HeaderName, HeaderValue)>,
    },
    Seal,
    SealWith(Vec<Edit>),
    /// Keep a snapshot to check later that it never changed.
    Hold,
    DropHeld,
    Get(HeaderName),
    Read(HeaderName),
}

/// How the handle is built.
#[derive(Debug, Clone)]
pub struct Config {
    pub max_entries: Option<usize>,
    pub max_bytes: Option<usize>,
    pub extra_sensitive: bool,
    /// Build the handle with `Publication::Locked` instead of the default `LockFree`.
    pub locked: bool,
}

// ---------------------------------------------------------------------------------------------
// The oracle
// ---------------------------------------------------------------------------------------------

struct Model {
    map: HeaderMap,
    version: u64,
    sealed: bool,
    config: Config,
}

fn bytes(map: &HeaderMap) -> usize {
    map.iter().map(|(n, v)| n.as_str().len() + v.len()).sum()
}

impl Model {
    fn is_secret_name(&self, name: &HeaderName) -> bool {
        matches!(
            name.as_str(),
            "authorization" | "proxy-authorization" | "cookie" | "set-cookie"
        ) || (self.config.extra_sensitive && name == "x-api-key")
    }

    /// The answer a write gets, given the map it would publish (or the full-map error).
    fn admit(&self, next: Result<HeaderMap, Error>) -> Result<HeaderMap, Error> {
        if self.sealed {
            return Err(Error::Sealed {
                version: self.version,
            });
        }
        let next = next?;
        if let Some(max) = self.config.max_entries {
            if next.len() > max {
                return Err(Error::LimitExceeded {
                    limit: Limit::Entries,
                    max,
                    attempted: next.len(),
                });
            }
        }
        if let Some(max) = self.config.max_bytes {
            let attempted = bytes(&next);
            if attempted > max {
                return Err(Error::LimitExceeded {
                    limit: Limit::Bytes,
                    max,
                    attempted,
                });
            }
        }
        Ok(next)
    }

    fn publish(&mut self, map: HeaderMap) {
        self.map = map;
        self.version += 1;
    }

    fn edited(&self, edits: &[Edit]) -> Result<HeaderMap, Error> {
        let mut next = self.map.clone();
        apply(&mut next, edits).map_err(Error::from)?;
        Ok(next)
    }
}

fn build(config: &Config) -> SharedHeaders {
    let mut b = SharedHeaders::builder();
    if let Some(max) = config.max_entries {
        b = b.max_entries(max);
    }
    if let Some(max) = config.max_bytes {
        b = b.max_bytes(max);
    }
    if config.extra_sensitive {
        b = b.sensitive([HeaderName::from_static("x-api-key")]);
    }
    if config.locked {
        b = b.publication(shared_headers::Publication::Locked);
    }
    b.build()
}

/// Every read of the handle agrees with the model; with `print`, no printed form leaks a secret.
fn check_reads(h: &SharedHeaders, m: &Model, probe: &HeaderName, print: bool) {
    let snap = h.snapshot();
    assert_eq!(snap.header_map(), &m.map);
    assert!(
        snap.iter().eq(m.map.iter()),
        "iteration order differs from the oracle's"
    );
    for name in POOL {
        let all: Vec<HeaderValue> = m.map.get_all(*name).iter().cloned().collect();
        assert_eq!(h.get_all(*name), all, "get_all {name}");
    }
    assert_eq!(snap.version(), m.version);
    assert_eq!(snap.is_sealed(), m.sealed);
    assert_eq!(h.version(), m.version);
    assert_eq!(h.is_sealed(), m.sealed);
    assert_eq!(h.len(), m.map.len());
    assert_eq!(h.is_empty(), m.map.is_empty());
    assert_eq!(h.get(probe), m.map.get(probe).cloned());
    assert_eq!(h.contains_key(probe), m.map.contains_key(probe));
    let all: Vec<HeaderValue> = m.map.get_all(probe).iter().cloned().collect();
    assert_eq!(h.get_all(probe), all);
    assert!(h.read(|map| map == &m.map));
    let draft = h.draft();
    assert_eq!(draft.base_version(), m.version);
    assert_eq!(&*draft, &m.map);
    // Every handle flags secret values.
    {
        for (n, v) in snap.iter() {
            if m.is_secret_name(n) {
                assert!(v.is_sensitive(), "{} not marked sensitive", n);
            }
        }
    }
    // No secret value is ever printed. Values of secret names are all made of 'S', so any run
    // of three 'S' in the output would be a leak (public values never contain 'S').
    if print {
        let shown = format!("{:?} {:?} {}", h, snap, snap.redacted());
        assert!(!shown.contains("SSS"), "secret leaked: {}", shown);
    }
}

/// Secret names get values that are recognizable in output; other values never contain 'S'.
fn tag(m: &Model, name: &HeaderName, value: HeaderValue) -> HeaderValue {
    if m.is_secret_name(name) || value.is_sensitive() {
        let mut v = HeaderValue::from_bytes(&vec![b'S'; value.len().clamp(3, 64)]).unwrap();
        v.set_sensitive(value.is_sensitive());
        v
    } else if value.as_bytes().contains(&b'S') {
        let b: Vec<u8> = value
            .as_bytes()
            .iter()
            .map(|&c| if c == b'S' { b's' } else { c })
            .collect();
        HeaderValue::from_bytes(&b).unwrap()
    } else {
        value
    }
}

fn tag_edits(m: &Model, edits: Vec<Edit>) -> Vec<Edit> {
    edits
        .into_iter()
        .map(|e| match e {
            Edit::Insert(n, v) => {
                let v = tag(m, &n, v);
                Edit::Insert(n, v)
            }
            Edit::Append(n, v) => {
                let v = tag(m, &n, v);
                Edit::Append(n, v)
            }
            other => other,
        })
        .collect()
}

/// What a played sequence ended with, so drivers can check their generators' coverage.
#[derive(Debug, Clone, Copy)]
pub struct Ended {
    pub version: u64,
    pub sealed: bool,
}

pub fn run(config: Config, ops: Vec<Op>) -> Ended {
    let original = build(&config);
    let clones = [original.clone(), original.clone()];
    // A cached reader kept across every step: it must agree with the oracle after each one.
    let mut reader = original.reader();
    let mut m = Model {
        map: HeaderMap::new(),
        version: 0,
        sealed: false,
        config,
    };
    let mut held: Vec<(Snapshot, HeaderMap, u64, bool)> = Vec::new();
    let mut probe = HeaderName::from_static("x-a");

    let steps = ops.len();
    for (step, op) in ops.into_iter().enumerate() {
        // Writes go through the two clones in turn: they share one set of headers.
        let h = &clones[step % 2];
        match op {
            Op::Insert(n, v) => {
                let v = tag(&m, &n, v);
                let mut next = m.map.clone();
                let expected = next
                    .try_insert(n.clone(), v.clone())
                    .map_err(Error::from)
                    .map(|prev| (prev, next));
                let expected = match expected {
                    Ok((prev, next)) => m.admit(Ok(next)).map(|next| (prev, next)),
                    Err(e) => m.admit(Err(e)).map(|next| (None, next)),
                };
                let got = h.insert(n.clone(), v);
                match expected {
                    Ok((prev, next)) => {
                        assert_eq!(got, Ok(prev));
                        m.publish(next);
                    }
                    Err(e) => assert_eq!(got, Err(e)),
                }
                probe = n;
            }
            Op::Append(n, v) => {
                let v = tag(&m, &n, v);
                let mut next = m.map.clone();
                let expected = match next.try_append(n.clone(), v.clone()) {
                    Ok(existed) => m.admit(Ok(next)).map(|next| (existed, next)),
                    Err(e) => m.admit(Err(e.into())).map(|next| (false, next)),
                };
                let got = h.append(n.clone(), v);
                match expected {
                    Ok((existed, next)) => {
                        assert_eq!(got, Ok(existed));
                        m.publish(next);
                    }
                    Err(e) => assert_eq!(got, Err(e)),
                }
                probe = n;
            }
            Op::Remove(n) => {
                let mut next = m.map.clone();
                let removed = next.remove(&n);
                let got = h.remove(&n);
                if m.sealed {
                    assert_eq!(got, Err(Error::Sealed { version: m.version }));
                } else {
                    assert_eq!(got, Ok(removed.clone()));
                    if removed.is_some() {
                        m.publish(next);
                    }
                }
                probe = n;
            }
            Op::Update(edits) => {
                let edits = tag_edits(&m, edits);
                let expected = m.admit(m.edited(&edits));
                let got = h.update(|map| apply(map, &edits));
                match (expected, got) {
                    (Ok(next), Ok(Ok(()))) => m.publish(next),
                    // The closure saw the full map and reported it; the write still published
                    // what the closure left, exactly like the oracle stopped.
                    (Err(Error::MaxSizeReached), Ok(Err(_))) => {
                        let mut next = m.map.clone();
                        let _ = apply(&mut next, &edits);
                        let next = m.admit(Ok(next)).expect("partial edit within limits");
                        m.publish(next);
                    }
                    (Err(e), got) => assert_eq!(got.map(|_| ()), Err(e)),
                    (Ok(_), got) => panic!("update: expected Ok, got {got:?}"),
                }
            }
            Op::Replace(edits) => {
                let edits = tag_edits(&m, edits);
                let mut map = HeaderMap::new();
                let _ = apply(&mut map, &edits);
                let expected = m.admit(Ok(map.clone()));
                let got = h.replace(map);
                match expected {
                    Ok(next) => {
                        let snap = got.expect("replace");
                        assert_eq!(snap.version(), m.version + 1);
                        m.publish(next);
                    }
                    Err(e) => assert_eq!(got.map(|_| ()), Err(e)),
                }
            }
            Op::DraftCommit { edits, interleave } => {
                let edits = tag_edits(&m, edits);
                let mut draft = h.draft();
                assert_eq!(draft.base_version(), m.version);
                let _ = apply(&mut draft, &edits);
                let drafted: HeaderMap = (*draft).clone();
                let base = m.version;
                if let Some((n, v)) = interleave {
                    let v = tag(&m, &n, v);
                    let mut next = m.map.clone();
                    let ok = next.try_append(n.clone(), v.clone()).is_ok();
                    let expected = if ok {
                        m.admit(Ok(next))
                    } else {
                        m.admit(Err(Error::MaxSizeReached))
                    };
                    let got = h.append(n, v);
                    match expected {
                        Ok(next) => {
                            assert!(got.is_ok());
                            m.publish(next);
                        }
                        Err(e) => assert_eq!(got, Err(e)),
                    }
                }
                let got = h.commit(draft);
                if m.sealed {
                    assert_eq!(got, Err(Error::Sealed { version: m.version }));
                } else if m.version != base {
                    assert_eq!(
                        got,
                        Err(Error::Conflict {
                            expected: base,
                            found: m.version
                        })
                    );
                } else {
                    match m.admit(Ok(drafted)) {
                        Ok(next) => {
                            assert_eq!(got.map(|s| s.version()), Ok(m.version + 1));
                            m.publish(next);
                        }
                        Err(e) => assert_eq!(got, Err(e)),
                    }
                }
            }
            Op::Seal => {
                let got = h.seal();
                match m.admit(Ok(m.map.clone())) {
                    Ok(next) => {
                        let snap = got.expect("seal");
                        assert!(snap.is_sealed());
                        m.publish(next);
                        m.sealed = true;
                    }
                    Err(e) => assert_eq!(got, Err(e)),
                }
            }
            Op::SealWith(edits) => {
                let edits = tag_edits(&m, edits);
                let expected = m.admit(m.edited(&edits).or_else(|_| {
                    // A closure that ignores the full-map error still seals what it made.
                    let mut next = m.map.clone();
                    let _ = apply(&mut next, &edits);
                    Ok(next)
                }));
                let got = h.seal_with(|map| {
                    let _ = apply(map, &edits);
                });
                match expected {
                    Ok(next) => {
                        let ((), snap) = got.expect("seal_with");
                        assert!(snap.is_sealed());
                        assert_eq!(snap.header_map(), &next);
                        m.publish(next);
                        m.sealed = true;
                    }
                    Err(e) => assert_eq!(got.map(|_| ()), Err(e)),
                }
            }
            Op::Hold => held.push((h.snapshot(), m.map.clone(), m.version, m.sealed)),
            Op::DropHeld => drop(held.pop()),
            Op::Get(n) | Op::Read(n) => probe = n,
        }
        // Printing long values is slow: check the printed forms every few steps and at the end.
        for h in &clones {
            check_reads(h, &m, &probe, step % 4 == 0 || step + 1 == steps);
        }
        let cached = reader.snapshot();
        assert_eq!(cached.header_map(), &m.map, "the reader's snapshot differs");
        assert_eq!(
            (cached.version(), cached.is_sealed()),
            (m.version, m.sealed)
        );
        assert_eq!(
            (reader.version(), reader.is_sealed()),
            (m.version, m.sealed)
        );
        assert_eq!(reader.get(&probe), m.map.get(&probe).cloned(), "reader get");
        assert_eq!(reader.contains_key(&probe), m.map.contains_key(&probe));
        for (snap, map, version, sealed) in &held {
            // A seal marks the map sealed in place: a snapshot taken before it stays unsealed.
            assert_eq!(snap.is_sealed(), *sealed, "a kept snapshot's seal changed");
            assert_eq!(snap.header_map(), map, "a kept snapshot changed");
            assert!(snap.iter().eq(map.iter()), "a kept snapshot changed order");
            assert_eq!(snap.version(), *version);
        }
    }
    let ended = Ended {
        version: m.version,
        sealed: m.sealed,
    };
    let [h, other] = clones;
    drop(other);
    drop(original);
    // Consuming reads agree too.
    let snap = h.snapshot();
    assert_eq!(snap.clone().into_header_map(), m.map.clone());
    assert!(Snapshot::ptr_eq(&snap, &h.snapshot()));
    assert_eq!(h.into_header_map(), m.map);
    ended
}

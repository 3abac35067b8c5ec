//! Differential test: random operation sequences run on `SharedHeaders` and on a plain
//! `HeaderMap` oracle, compared after every step.
//!
//! The oracle is a `HeaderMap` plus the version and sealed flag the rules predict: a new handle is
//! version 0, each published change adds 1 (an `update` batch, a `replace`, a successful `commit`
//! and a seal each add exactly 1), a refused write or a removal of an absent key adds nothing.
//! After every step the handle must hold exactly the oracle's map (same iteration order, same
//! order of multi-values), version and sealed flag; every return value must equal what the oracle
//! returned; and every snapshot kept from earlier steps must still be exactly what it was.
//!
//! Deterministic: a fixed list of seeds drives a small PRNG (SplitMix64), so a failure names the
//! seed and step that reproduce it. (A proptest version with shrinking lives elsewhere.)
//!
//! Both publications run: each handle (the first and every fresh one after a seal) is built with
//! `Publication::LockFree` or `Publication::Locked` at random, and a `Reader` of the current
//! handle, kept across steps, must agree with the oracle after every step too.

use http::header::{ACCEPT, HOST, HeaderName, SET_COOKIE};
use http::{HeaderMap, HeaderValue};
use shared_headers::{Draft, Error, Publication, Reader, SharedHeaders, Snapshot};

/// SplitMix64: tiny, deterministic, good enough to pick operations.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// A small pool of names so that keys collide often: standard and custom, including a name
/// that is routinely multi-valued.
fn names() -> Vec<HeaderName> {
    vec![
        HOST,
        ACCEPT,
        SET_COOKIE,
        HeaderName::from_static("x-a"),
        HeaderName::from_static("x-b"),
        HeaderName::from_static("x-request-id"),
    ]
}

/// One edit of a map. Values are unique per run, so any reordering of multi-values shows.
#[derive(Debug, Clone)]
enum Edit {
    Insert(usize, u64),
    Append(usize, u64),
    Remove(usize),
}

/// What an edit returned, comparable between the handle and the oracle.
#[derive(Debug, PartialEq)]
enum Outcome {
    Insert(Option<HeaderValue>),
    Append(bool),
    Remove(Option<HeaderValue>),
}

fn apply(edit: &Edit, names: &[HeaderName], map: &mut HeaderMap) -> Outcome {
    match *edit {
        Edit::Insert(n, value) => Outcome::Insert(map.insert(&names[n], value.into())),
        Edit::Append(n, value) => Outcome::Append(map.append(&names[n], value.into())),
        Edit::Remove(n) => Outcome::Remove(map.remove(&names[n])),
    }
}

fn apply_all(edits: &[Edit], names: &[HeaderName], map: &mut HeaderMap) -> Vec<Outcome> {
    edits.iter().map(|e| apply(e, names, map)).collect()
}

/// The same edit through the handle's own write methods.
fn apply_shared(edit: &Edit, names: &[HeaderName], h: &SharedHeaders) -> Result<Outcome, Error> {
    match *edit {
        Edit::Insert(n, value) => h.insert(&names[n], value.into()).map(Outcome::Insert),
        Edit::Append(n, value) => h.append(&names[n], value.into()).map(Outcome::Append),
        Edit::Remove(n) => h.remove(&names[n]).map(Outcome::Remove),
    }
}

/// What the rules say the handle holds.
#[derive(Clone)]
struct Oracle {
    map: HeaderMap,
    version: u64,
    sealed: bool,
}

impl Oracle {
    fn refusal(&self) -> Error {
        Error::Sealed {
            version: self.version,
        }
    }
}

/// Asserts the handle and a snapshot agree with the oracle in every observable way.
#[track_caller]
fn assert_matches(h: &SharedHeaders, names: &[HeaderName], oracle: &Oracle, ctx: &str) {
    let snap = h.snapshot();
    assert_snapshot(&snap, oracle, ctx);
    assert_eq!(h.version(), oracle.version, "{ctx}: version");
    assert_eq!(h.is_sealed(), oracle.sealed, "{ctx}: sealed");
    assert_eq!(h.len(), oracle.map.len(), "{ctx}: len");
    assert_eq!(h.is_empty(), oracle.map.is_empty(), "{ctx}: is_empty");
    for name in names {
        assert_eq!(
            h.get(name),
            oracle.map.get(name).cloned(),
            "{ctx}: get {name}"
        );
        let all: Vec<HeaderValue> = oracle.map.get_all(name).iter().cloned().collect();
        assert_eq!(h.get_all(name), all, "{ctx}: get_all {name}");
        assert_eq!(
            h.contains_key(name),
            oracle.map.contains_key(name),
            "{ctx}: contains_key {name}"
        );
    }
}

/// A handle holding `map` at version 0, with the lock-free or the locked publication.
fn handle_with(map: HeaderMap, locked: bool) -> SharedHeaders {
    if locked {
        SharedHeaders::builder()
            .publication(Publication::Locked)
            .build_from(map)
            .unwrap()
    } else {
        SharedHeaders::from(map)
    }
}

/// Asserts a cached reader agrees with the oracle in every observable way.
#[track_caller]
fn assert_reader(reader: &mut Reader, names: &[HeaderName], oracle: &Oracle, ctx: &str) {
    assert_snapshot(&reader.snapshot(), oracle, &format!("{ctx}: reader"));
    assert_eq!(reader.version(), oracle.version, "{ctx}: reader version");
    assert_eq!(reader.is_sealed(), oracle.sealed, "{ctx}: reader sealed");
    for name in names {
        assert_eq!(
            reader.get(name),
            oracle.map.get(name).cloned(),
            "{ctx}: reader get {name}"
        );
        assert_eq!(
            reader.contains_key(name),
            oracle.map.contains_key(name),
            "{ctx}: reader contains_key {name}"
        );
    }
}

#[track_caller]
fn assert_snapshot(snap: &Snapshot, oracle: &Oracle, ctx: &str) {
    assert_eq!(
        snap.iter().collect::<Vec<_>>(),
        oracle.map.iter().collect::<Vec<_>>(),
        "{ctx}: contents and order"
    );
    assert_eq!(snap.version(), oracle.version, "{ctx}: snapshot version");
    assert_eq!(snap.is_sealed(), oracle.sealed, "{ctx}: snapshot sealed");
}

struct Run {
    rng: Rng,
    names: Vec<HeaderName>,
    /// Two clones of one handle; writes go through either, at random.
    handles: [SharedHeaders; 2],
    oracle: Oracle,
    /// A pending draft and what its contents should be.
    draft: Option<(Draft, HeaderMap)>,
    /// Snapshots kept from earlier steps and what they held then.
    kept: Vec<(Snapshot, Oracle)>,
    /// A cached reader of the current handle, kept across steps.
    reader: Reader,
    next_value: u64,
}

impl Run {
    fn new(seed: u64) -> Self {
        let h = handle_with(HeaderMap::new(), seed & 1 == 0);
        Run {
            reader: h.reader(),
            rng: Rng(seed),
            names: names(),
            handles: [h.clone(), h],
            oracle: Oracle {
                map: HeaderMap::new(),
                version: 0,
                sealed: false,
            },
            draft: None,
            kept: Vec::new(),
            next_value: 0,
        }
    }

    fn edit(&mut self) -> Edit {
        let name = self.rng.below(self.names.len());
        self.next_value += 1;
        match self.rng.below(3) {
            0 => Edit::Insert(name, self.next_value),
            1 => Edit::Append(name, self.next_value),
            _ => Edit::Remove(name),
        }
    }

    /// 1 to 4 edits, the first always adding a value (so the batch is a real change).
    fn batch(&mut self) -> Vec<Edit> {
        let mut edits = vec![self.edit()];
        if let Edit::Remove(n) = edits[0] {
            edits[0] = Edit::Append(n, self.next_value);
        }
        for _ in 0..self.rng.below(4) {
            edits.push(self.edit());
        }
        edits
    }

    /// Checks the result of a batch write (`update`, `seal_with`): refused when sealed, else the
    /// same outcomes as the oracle and one more version. Returns whether it was accepted.
    fn expect_batch(&mut self, edits: &[Edit], got: Result<Vec<Outcome>, Error>) -> bool {
        if self.oracle.sealed {
            assert_eq!(got, Err(self.oracle.refusal()), "{edits:?} after seal");
            return false;
        }
        let expected = apply_all(edits, &self.names, &mut self.oracle.map);
        assert_eq!(got, Ok(expected), "{edits:?}");
        self.oracle.version += 1;
        true
    }

    /// Checks the result of a whole-map write (`replace`, `commit`): refused when sealed, else
    /// `map` is published as the next version.
    fn expect_publish(&mut self, got: Result<Snapshot, Error>, map: HeaderMap, what: &str) {
        if self.oracle.sealed {
            assert_eq!(got, Err(self.oracle.refusal()), "{what} after seal");
            return;
        }
        self.oracle.map = map;
        self.oracle.version += 1;
        assert_snapshot(&got.unwrap(), &self.oracle, what);
    }

    fn handle(&mut self) -> SharedHeaders {
        self.handles[self.rng.below(2)].clone()
    }

    /// Performs one random operation on both sides and checks its return value. Returns a
    /// description for failure messages.
    fn step(&mut self) -> String {
        let h = self.handle();
        let names = self.names.clone();
        let roll = self.rng.below(100);
        match roll {
            // Single edits through insert / append / remove.
            0..=54 => {
                let edit = self.edit();
                let got = apply_shared(&edit, &names, &h);
                if self.oracle.sealed {
                    assert_eq!(got, Err(self.oracle.refusal()), "{edit:?} after seal");
                } else {
                    let expected = apply(&edit, &names, &mut self.oracle.map);
                    let published = !matches!(expected, Outcome::Remove(None));
                    assert_eq!(got, Ok(expected), "{edit:?}");
                    self.oracle.version += u64::from(published);
                }
                format!("{edit:?}")
            }
            // A batch through update: one version for the whole batch.
            55..=66 => {
                let edits = self.batch();
                let mut runs = 0;
                let got = h.update(|m| {
                    runs += 1;
                    apply_all(&edits, &names, m)
                });
                let accepted = self.expect_batch(&edits, got);
                assert_eq!(
                    runs,
                    usize::from(accepted),
                    "update closure runs once, or never"
                );
                format!("update {edits:?}")
            }
            // Replace the whole map.
            67..=69 => {
                let mut map = HeaderMap::new();
                for _ in 0..self.rng.below(5) {
                    let edit = self.edit();
                    apply(&edit, &names, &mut map);
                }
                let got = h.replace(map.clone());
                self.expect_publish(got, map, "replace");
                "replace".to_owned()
            }
            // Take a draft (possibly abandoning the previous one).
            70..=75 => {
                let draft = h.draft();
                assert_eq!(draft.base_version(), self.oracle.version);
                assert_eq!(*draft, self.oracle.map);
                let copy = self.oracle.map.clone();
                self.draft = Some((draft, copy));
                "draft".to_owned()
            }
            // Edit the pending draft: private until committed.
            76..=83 => {
                let edit = self.edit();
                if let Some((draft, expected)) = &mut self.draft {
                    assert_eq!(apply(&edit, &names, draft), apply(&edit, &names, expected));
                }
                format!("draft edit {edit:?}")
            }
            // Commit the pending draft: Ok if nothing was published since, else Conflict.
            84..=91 => {
                if let Some((draft, expected)) = self.draft.take() {
                    let base = draft.base_version();
                    let got = h.commit(draft);
                    if !self.oracle.sealed && base != self.oracle.version {
                        let conflict = Error::Conflict {
                            expected: base,
                            found: self.oracle.version,
                        };
                        assert_eq!(got, Err(conflict));
                    } else {
                        self.expect_publish(got, expected, "commit");
                    }
                }
                "commit".to_owned()
            }
            // Seal, or seal with final edits.
            92..=94 => {
                let edits = if roll == 94 { self.batch() } else { Vec::new() };
                let got = h.seal_with(|m| apply_all(&edits, &names, m));
                let (outcomes, snap) = match got {
                    Ok((outcomes, snap)) => (Ok(outcomes), Some(snap)),
                    Err(e) => (Err(e), None),
                };
                if self.expect_batch(&edits, outcomes) {
                    self.oracle.sealed = true;
                    assert_snapshot(&snap.unwrap(), &self.oracle, "seal result");
                }
                format!("seal_with {edits:?}")
            }
            // Once sealed, start over from the sealed map in a fresh handle (version 0).
            _ => {
                if self.oracle.sealed {
                    let locked = self.rng.below(2) == 0;
                    let h = handle_with(self.oracle.map.clone(), locked);
                    self.reader = h.reader();
                    self.handles = [h.clone(), h];
                    self.oracle.version = 0;
                    self.oracle.sealed = false;
                    self.draft = None;
                }
                "fresh handle".to_owned()
            }
        }
    }

    fn run(&mut self, seed: u64, steps: usize) {
        for i in 0..steps {
            let what = self.step();
            let ctx = format!("seed {seed:#x}, step {i} ({what})");
            for h in &self.handles {
                assert_matches(h, &self.names, &self.oracle, &ctx);
            }
            assert_reader(&mut self.reader, &self.names, &self.oracle, &ctx);
            for (snap, then) in &self.kept {
                assert_snapshot(snap, then, &format!("{ctx}: kept snapshot"));
            }
            // Keep a few snapshots around to prove later writes never change them.
            if self.rng.below(8) == 0 {
                if self.kept.len() == 4 {
                    self.kept.remove(0);
                }
                self.kept
                    .push((self.handles[0].snapshot(), self.oracle.clone()));
            }
        }
    }
}

#[test]
fn random_operations_match_a_header_map_oracle() {
    const SEEDS: u64 = 48;
    const STEPS: usize = 600;
    let mut totals = (0u64, 0u64);
    for seed in 0..SEEDS {
        let seed = 0x5EED_0000 + seed;
        let mut run = Run::new(seed);
        run.run(seed, STEPS);
        totals.0 += run.oracle.version;
        totals.1 += u64::from(run.oracle.sealed);
    }
    // The generator must actually exercise publishing and sealing.
    assert!(
        totals.0 > SEEDS * 10,
        "too few published versions: {totals:?}"
    );
    assert!(totals.1 > 0, "no run ended sealed: {totals:?}");
}

#[test]
fn one_long_run() {
    // One longer sequence: versions grow large and several seal-and-restart cycles happen.
    let seed = 0xD1FF;
    let mut run = Run::new(seed);
    run.run(seed, 3_000);
}

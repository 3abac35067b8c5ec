//! Differential test: deterministic random operation sequences played on `SharedHeaders` and on
//! a plain `HeaderMap` oracle, compared after every step.
//!
//! This is one of the three drivers of the one model in `tests/support/model.rs` (with
//! `tests/proptest_model.rs` and the fuzz target): the model defines the operations and the
//! oracle; this file only generates sequences. A fixed list of seeds drives a small PRNG
//! (SplitMix64), so a failure names the seed that reproduces it; values are unique per step, so
//! any reordering of multi-values shows.

use http::header::{HeaderName, HeaderValue};

#[path = "support/model.rs"]
mod model;
use model::{Config, Edit, Ended, Op, POOL, run};

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

/// Generates operation sequences from a seed.
struct Gen {
    rng: Rng,
    serial: u64,
}

impl Gen {
    fn new(seed: u64) -> Self {
        Gen {
            rng: Rng(seed),
            serial: 0,
        }
    }

    fn name(&mut self) -> HeaderName {
        HeaderName::from_static(POOL[self.rng.below(POOL.len())])
    }

    /// A value unique within the run, so that a lost or reordered value is visible.
    fn value(&mut self) -> HeaderValue {
        self.serial += 1;
        HeaderValue::from_str(&format!("v{}", self.serial)).unwrap()
    }

    fn edit(&mut self) -> Edit {
        match self.rng.below(7) {
            0..=2 => Edit::Insert(self.name(), self.value()),
            3..=5 => Edit::Append(self.name(), self.value()),
            _ => Edit::Remove(self.name()),
        }
    }

    fn edits(&mut self) -> Vec<Edit> {
        let n = self.rng.below(5);
        (0..n).map(|_| self.edit()).collect()
    }

    /// One operation; a seal about once in 500 steps, so most sequences publish for long first.
    fn op(&mut self) -> Op {
        if self.rng.below(500) == 0 {
            return if self.rng.below(2) == 0 {
                Op::Seal
            } else {
                Op::SealWith(self.edits())
            };
        }
        match self.rng.below(118) {
            0..=29 => Op::Insert(self.name(), self.value()),
            30..=59 => Op::Append(self.name(), self.value()),
            60..=71 => Op::Remove(self.name()),
            72..=81 => Op::Update(self.edits()),
            82..=85 => Op::Replace(self.edits()),
            86..=95 => {
                let edits = self.edits();
                let interleave = (self.rng.below(3) == 0).then(|| (self.name(), self.value()));
                Op::DraftCommit { edits, interleave }
            }
            96..=103 => Op::Hold,
            104..=107 => Op::DropHeld,
            108..=111 => Op::Get(self.name()),
            _ => Op::Read(self.name()),
        }
    }

    fn config(&mut self) -> Config {
        Config {
            // Limits sometimes, so refusals for size are part of the sequences too.
            max_entries: (self.rng.below(4) == 0).then(|| 8 + self.rng.below(40)),
            max_bytes: (self.rng.below(4) == 0).then(|| 64 + self.rng.below(2_000)),
            extra_sensitive: self.rng.below(2) == 0,
            locked: self.rng.below(2) == 0,
        }
    }
}

/// Plays `steps` operations of `seed`, naming the seed if the model finds a disagreement.
fn play(seed: u64, steps: usize) -> Ended {
    let mut g = Gen::new(seed);
    let config = g.config();
    let ops: Vec<Op> = (0..steps).map(|_| g.op()).collect();
    match std::panic::catch_unwind(|| run(config, ops)) {
        Ok(ended) => ended,
        Err(panic) => {
            eprintln!("differential: seed {seed:#x} ({steps} steps) disagrees with the oracle");
            std::panic::resume_unwind(panic)
        }
    }
}

#[test]
fn random_operations_match_a_header_map_oracle() {
    const SEEDS: u64 = 48;
    const STEPS: usize = 600;
    let (mut published, mut sealed) = (0u64, 0u64);
    for seed in 0..SEEDS {
        let ended = play(0x5EED_0000 + seed, STEPS);
        published += ended.version;
        sealed += u64::from(ended.sealed);
    }
    // The generator must actually exercise publishing and sealing.
    assert!(
        published > SEEDS * 10,
        "too few published versions: {published}"
    );
    assert!(sealed > 0, "no run ended sealed");
    assert!(
        sealed < SEEDS,
        "every run ended sealed: too little happens before a seal"
    );
}

#[test]
fn long_runs_reach_high_versions_and_seal() {
    // Longer sequences, each from a fresh handle: versions grow large, and every run reaches
    // its seal (and then checks that everything after it is refused).
    let (mut published, mut sealed) = (0u64, 0u64);
    for seed in 0..6 {
        let ended = play(0xD1FF_0000 + seed, 1_000);
        published += ended.version;
        sealed += u64::from(ended.sealed);
    }
    assert!(
        published > 6 * 100,
        "versions stayed low: {published} in 6 runs"
    );
    assert!(sealed >= 3, "only {sealed} of 6 long runs sealed");
}

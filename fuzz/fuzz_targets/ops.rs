//! Fuzz target `ops`: decodes the input bytes into a handle configuration and a sequence of
//! operations (every write and read of `SharedHeaders`), then plays it against the `HeaderMap`
//! oracle shared with `tests/proptest_model.rs`. Any disagreement or panic is a crash.
//!
//! Run: `cargo +nightly fuzz run ops` (from the repository root; see `fuzz/README.md`).

#![no_main]

use http::header::{HeaderName, HeaderValue};
use libfuzzer_sys::fuzz_target;

#[path = "../../tests/support/model.rs"]
mod model;
use model::{Config, Edit, Op, POOL, run};

/// Reads the input front to back; an exhausted input reads as zeros.
struct Input<'a>(&'a [u8]);

impl Input<'_> {
    fn byte(&mut self) -> u8 {
        match self.0.split_first() {
            Some((&b, rest)) => {
                self.0 = rest;
                b
            }
            None => 0,
        }
    }

    fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.byte(), self.byte()])
    }

    fn name(&mut self) -> HeaderName {
        let b = self.byte();
        if b < 224 {
            return HeaderName::from_static(POOL[usize::from(b) % POOL.len()]);
        }
        const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789-_";
        let len = 1 + usize::from(self.byte() % 32);
        let bytes: Vec<u8> = (0..len)
            .map(|_| ALPHABET[usize::from(self.byte()) % ALPHABET.len()])
            .collect();
        HeaderName::from_bytes(&bytes).expect("alphabet is valid")
    }

    fn value(&mut self) -> HeaderValue {
        match self.byte() % 6 {
            0 => HeaderValue::from_static(""),
            // Raw bytes, with the few invalid ones (controls, DEL) made into spaces.
            1..=3 => {
                let len = usize::from(self.byte() % 48);
                let bytes: Vec<u8> = (0..len)
                    .map(|_| match self.byte() {
                        b @ (b'\t' | 0x20..=0x7e | 0x80..=0xff) => b,
                        _ => b' ',
                    })
                    .collect();
                HeaderValue::from_bytes(&bytes).expect("valid bytes")
            }
            // Long values, up to 64 KiB.
            4 => HeaderValue::from_bytes(&vec![b'v'; usize::from(self.u16())]).expect("valid"),
            _ => {
                let mut v = HeaderValue::from(self.u16());
                v.set_sensitive(true);
                v
            }
        }
    }

    fn edits(&mut self) -> Vec<Edit> {
        let n = self.byte() % 8;
        (0..n)
            .map(|_| match self.byte() % 7 {
                0..=2 => Edit::Insert(self.name(), self.value()),
                3..=5 => Edit::Append(self.name(), self.value()),
                _ => Edit::Remove(self.name()),
            })
            .collect()
    }

    fn op(&mut self) -> Op {
        match self.byte() % 16 {
            0..=2 => Op::Insert(self.name(), self.value()),
            3..=5 => Op::Append(self.name(), self.value()),
            6 => Op::Remove(self.name()),
            7 => Op::Update(self.edits()),
            8 => Op::Replace(self.edits()),
            9 => {
                let edits = self.edits();
                let interleave = (self.byte() % 2 == 1).then(|| (self.name(), self.value()));
                Op::DraftCommit { edits, interleave }
            }
            10 => Op::Seal,
            11 => Op::SealWith(self.edits()),
            12 => Op::Hold,
            13 => Op::DropHeld,
            14 => Op::Get(self.name()),
            _ => Op::Read(self.name()),
        }
    }

    fn config(&mut self) -> Config {
        let flags = self.byte();
        let max_entries = usize::from(self.byte());
        let max_bytes = usize::from(self.u16());
        Config {
            max_entries: (flags & 1 != 0).then_some(max_entries),
            max_bytes: (flags & 2 != 0).then_some(max_bytes),
            extra_sensitive: flags & 4 != 0,
            locked: flags & 16 != 0,
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let mut input = Input(data);
    let config = input.config();
    let mut ops = Vec::new();
    while !input.0.is_empty() && ops.len() < 512 {
        ops.push(input.op());
    }
    run(config, ops);
});

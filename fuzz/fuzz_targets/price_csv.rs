//! Price catalog import (`POST /api/v1/prices`): `headroom_server::prices::parse` on whatever
//! libFuzzer makes up. The checks are the property tests' (`server/tests/decoders/oracle.rs`):
//! no panic, a refusal locates its problems, accepted rows are valid, distinct, and export as
//! CSV that imports to the same rows.

#![no_main]

use libfuzzer_sys::fuzz_target;

#[allow(dead_code)]
#[path = "../../server/tests/decoders/oracle.rs"]
mod oracle;

fuzz_target!(|data: &[u8]| {
    oracle::price_csv(data);
});

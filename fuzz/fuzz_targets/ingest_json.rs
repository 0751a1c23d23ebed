//! JSON ingest (`POST /api/v1/runs`): `headroom_server::ingest::decode_json` on whatever
//! libFuzzer makes up. The checks are the property tests' (`server/tests/decoders/oracle.rs`):
//! no panic, a refusal is 400 or 422, an accepted run is valid and round-trips through both doors.

#![no_main]

use libfuzzer_sys::fuzz_target;

#[allow(dead_code)]
#[path = "../../server/tests/decoders/oracle.rs"]
mod oracle;

fuzz_target!(|data: &[u8]| {
    oracle::json(data);
});

//! gRPC ingest (`headroom.v1.Ingest/UploadRun`): `proto::decode_upload` (wire limits, prost,
//! conversion, validation) on whatever libFuzzer makes up. The checks are the property tests'
//! (`server/tests/decoders/oracle.rs`): no panic, a refusal is INVALID_ARGUMENT or
//! RESOURCE_EXHAUSTED signed as final, an accepted run is valid and round-trips through both doors.

#![no_main]

use libfuzzer_sys::fuzz_target;

#[allow(dead_code)]
#[path = "../../server/tests/decoders/oracle.rs"]
mod oracle;

fuzz_target!(|data: &[u8]| {
    oracle::protobuf(data);
});

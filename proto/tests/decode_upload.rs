//! `decode_upload`, the whole of what the gRPC door does to a message's bytes: the status of each
//! refusal, and arbitrary bytes answered as the codec and the service answer them.

use std::collections::BTreeMap;

use headroom_proto::{codec, decode_upload, encode_upload, pb, run_from_message};
use model::wire::validate::MAX_MEASUREMENTS;
use model::{Measurement, MeasurementStatus, NodeInfo, RunUpload, Stats, Suite, Unit};
use proptest::prelude::*;
use prost::Message;
use tonic::Code;

fn run() -> RunUpload {
    RunUpload {
        run_id: uuid::Uuid::from_u128(42),
        agent_version: "0.1.0".into(),
        started_at_ms: 1_700_000_000_000,
        finished_at_ms: 1_700_000_001_000,
        node: NodeInfo {
            node_id: "id".into(),
            hostname: "node".into(),
            cpu_model: String::new(),
            cpu_cores: 1,
            memory_bytes: 1 << 30,
            kernel: String::new(),
            instance_type: None,
            hourly_usd: None,
            gpus: vec![],
        },
        measurements: vec![Measurement {
            suite: Suite::System,
            case: "memcpy".into(),
            parameters: BTreeMap::new(),
            unit: Unit::BytesPerSecond,
            status: MeasurementStatus::Ok,
            reason: None,
            stats: Some(Stats::single(1e9)),
            floor: None,
            histogram: None,
        }],
    }
}

fn refusal(bytes: &[u8]) -> tonic::Status {
    let status = decode_upload(bytes).expect_err("refused");
    let signed = status.metadata().get(codec::REFUSAL_KEY).and_then(|v| v.to_str().ok());
    assert_eq!(signed, Some("content"), "{status:?}");
    status
}

#[test]
fn a_valid_run_comes_back_unchanged() {
    assert_eq!(decode_upload(&encode_upload(&run())).unwrap(), run());
}

#[test]
fn each_refusal_says_what_is_wrong() {
    let garbage = refusal(&[0xff; 8]);
    assert_eq!(garbage.code(), Code::InvalidArgument);
    assert!(garbage.message().starts_with("malformed protobuf:"), "{garbage:?}");

    let mut many = pb::RunUpload::from(&run());
    many.measurements = vec![pb::Measurement::default(); MAX_MEASUREMENTS + 1];
    let many = refusal(&many.encode_to_vec());
    assert_eq!(many.code(), Code::ResourceExhausted);
    assert!(many.message().starts_with("too many entries: measurements"), "{many:?}");

    let mut uuid = pb::RunUpload::from(&run());
    uuid.run_id = "not-a-uuid".into();
    let uuid = refusal(&uuid.encode_to_vec());
    assert_eq!(uuid.code(), Code::InvalidArgument);
    assert!(uuid.message().starts_with("invalid field run_id: not a UUID"), "{uuid:?}");

    let mut nan = run();
    nan.measurements[0].stats.as_mut().unwrap().p99 = f64::NAN;
    let nan = refusal(&encode_upload(&nan));
    assert_eq!(nan.message(), "invalid field measurements[0].stats.p99: must be a finite number");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    /// Whatever the bytes: no panic; decoding is the codec's half then the service's half; an
    /// accepted run is valid and encodes back to a message that decodes to it.
    #[test]
    fn any_bytes_are_answered_as_the_door_answers_them(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        let halves = codec::decode_message::<pb::RunUpload>(&bytes)
            .and_then(|m| run_from_message(m).map_err(codec::invalid_field));
        match decode_upload(&bytes) {
            Ok(run) => {
                prop_assert_eq!(run.validate(), Ok(()));
                prop_assert_eq!(decode_upload(&encode_upload(&run)).ok(), Some(run.clone()));
                prop_assert_eq!(halves.ok(), Some(run));
            }
            Err(status) => {
                let halves = halves.expect_err("the halves accept what the whole refuses");
                prop_assert_eq!((status.code(), status.message()), (halves.code(), halves.message()));
                prop_assert!(matches!(status.code(), Code::InvalidArgument | Code::ResourceExhausted));
            }
        }
    }
}

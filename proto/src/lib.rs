//! The gRPC ingest protocol (`headroom.v1`) and lossless conversion to and from
//! [`model::RunUpload`]. Conversion errors name the field the way JSON errors do.

pub mod codec;
pub mod limits;

#[allow(clippy::all)]
pub mod pb {
    tonic::include_proto!("headroom.v1");
}

/// The inference call timed by the agent's transport suite.
#[allow(clippy::all)]
pub mod transport {
    tonic::include_proto!("headroom.transport.v1");
}

/// The Open Inference Protocol (KServe V2) over gRPC, as the endpoint suite's client speaks it.
pub mod inference;

use model::{FieldError, IngestAck};
use tonic::Status;

/// Everything the gRPC door does to the bytes of a `RunUpload` before the run is stored: the
/// wire limits, prost's decoding ([`codec::decode_message`], which the codec runs), then the
/// conversion and the model's validation ([`run_from_message`], which the service runs). The
/// error is the status the server answers with. Pure: the entry point for fuzzing.
pub fn decode_upload(bytes: &[u8]) -> Result<model::RunUpload, Status> {
    let message = codec::decode_message::<pb::RunUpload>(bytes)?;
    run_from_message(message).map_err(codec::invalid_field)
}

/// The protobuf encoding of a run, as an agent sends it; [`decode_upload`] reads it back.
pub fn encode_upload(run: &model::RunUpload) -> Vec<u8> {
    use prost::Message;
    pb::RunUpload::from(run).encode_to_vec()
}

/// A decoded message as a valid [`model::RunUpload`]; the error names the first bad field.
pub fn run_from_message(message: pb::RunUpload) -> Result<model::RunUpload, FieldError> {
    let run = model::RunUpload::try_from(message)?;
    run.validate()?;
    Ok(run)
}

impl From<&model::RunUpload> for pb::RunUpload {
    fn from(run: &model::RunUpload) -> Self {
        let node = &run.node;
        pb::RunUpload {
            run_id: run.run_id.to_string(),
            agent_version: run.agent_version.clone(),
            started_at_ms: run.started_at_ms,
            finished_at_ms: run.finished_at_ms,
            node: Some(pb::Node {
                node_id: node.node_id.clone(),
                hostname: node.hostname.clone(),
                cpu_model: node.cpu_model.clone(),
                cpu_cores: node.cpu_cores,
                memory_bytes: node.memory_bytes,
                kernel: node.kernel.clone(),
                instance_type: node.instance_type.clone(),
                hourly_usd: node.hourly_usd,
                gpus: node.gpus.iter().map(gpu_to_pb).collect(),
            }),
            measurements: run.measurements.iter().map(measurement_to_pb).collect(),
        }
    }
}

fn gpu_to_pb(gpu: &model::GpuInfo) -> pb::Gpu {
    pb::Gpu {
        name: gpu.name.clone(),
        memory_bytes: gpu.memory_bytes,
        driver_version: gpu.driver_version.clone(),
        cuda_version: gpu.cuda_version.clone(),
        pcie_generation: gpu.pcie_generation,
        pcie_width: gpu.pcie_width,
    }
}

fn measurement_to_pb(m: &model::Measurement) -> pb::Measurement {
    pb::Measurement {
        suite: m.suite.as_str().to_string(),
        case: m.case.clone(),
        parameters: m.parameters.clone().into_iter().collect(),
        unit: m.unit.as_str().to_string(),
        status: m.status.as_str().to_string(),
        reason: m.reason.clone(),
        stats: m.stats.map(|s| pb::Stats {
            samples: s.samples,
            mean: s.mean,
            p50: s.p50,
            p90: s.p90,
            p99: s.p99,
            p999: s.p999,
            ci95_low: s.ci95_low,
            ci95_high: s.ci95_high,
        }),
        floor: m.floor.as_ref().map(|f| pb::Floor { name: f.name.clone(), value: f.value }),
        histogram: m.histogram.clone(),
    }
}

impl TryFrom<pb::RunUpload> for model::RunUpload {
    type Error = FieldError;

    fn try_from(run: pb::RunUpload) -> Result<Self, FieldError> {
        let run_id =
            uuid::Uuid::parse_str(&run.run_id).map_err(|e| FieldError::new("run_id", format!("not a UUID: {e}")))?;
        let node = run.node.ok_or_else(|| FieldError::new("node", "missing"))?;
        let measurements = run
            .measurements
            .into_iter()
            .enumerate()
            .map(|(i, m)| measurement_from_pb(m, &format!("measurements[{i}]")))
            .collect::<Result<_, _>>()?;
        Ok(model::RunUpload {
            run_id,
            agent_version: run.agent_version,
            started_at_ms: run.started_at_ms,
            finished_at_ms: run.finished_at_ms,
            node: model::NodeInfo {
                node_id: node.node_id,
                hostname: node.hostname,
                cpu_model: node.cpu_model,
                cpu_cores: node.cpu_cores,
                memory_bytes: node.memory_bytes,
                kernel: node.kernel,
                instance_type: node.instance_type,
                hourly_usd: node.hourly_usd,
                gpus: node
                    .gpus
                    .into_iter()
                    .map(|g| model::GpuInfo {
                        name: g.name,
                        memory_bytes: g.memory_bytes,
                        driver_version: g.driver_version,
                        cuda_version: g.cuda_version,
                        pcie_generation: g.pcie_generation,
                        pcie_width: g.pcie_width,
                    })
                    .collect(),
            },
            measurements,
        })
    }
}

fn measurement_from_pb(m: pb::Measurement, at: &str) -> Result<model::Measurement, FieldError> {
    let named = |field: &'static str| move |reason: String| FieldError::new(format!("{at}.{field}"), reason);
    Ok(model::Measurement {
        suite: model::Suite::parse(&m.suite).map_err(named("suite"))?,
        case: m.case,
        parameters: m.parameters.into_iter().collect(),
        unit: model::Unit::parse(&m.unit).map_err(named("unit"))?,
        status: model::MeasurementStatus::parse(&m.status).map_err(named("status"))?,
        reason: m.reason,
        stats: m.stats.map(|s| model::Stats {
            samples: s.samples,
            mean: s.mean,
            p50: s.p50,
            p90: s.p90,
            p99: s.p99,
            p999: s.p999,
            ci95_low: s.ci95_low,
            ci95_high: s.ci95_high,
        }),
        floor: m.floor.map(|f| model::Floor { name: f.name, value: f.value }),
        histogram: m.histogram,
    })
}

impl From<&IngestAck> for pb::UploadAck {
    fn from(ack: &IngestAck) -> Self {
        pb::UploadAck {
            run_id: ack.run_id.to_string(),
            duplicate: ack.duplicate,
            measurements_stored: ack.measurements_stored,
        }
    }
}

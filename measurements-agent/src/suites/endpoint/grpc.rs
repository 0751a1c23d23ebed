//! `kserve-v2-grpc`: the Open Inference Protocol over gRPC (Triton, KServe, MLServer). The
//! server and model metadata come from `ServerMetadata` and `ModelMetadata`; every request is
//! one `ModelInfer` with its tensors in `raw_input_contents` (as Triton's own clients send
//! them), encoded once before the load starts and sent over one HTTP/2 connection.

use anyhow::{Context, bail};
use bytes::Bytes;
use proto::inference::{
    GrpcInferenceServiceClient, MODEL_INFER, ModelInferRequest, ModelMetadataRequest, PreEncoded,
    ServerMetadataRequest, Skipped, model_infer_request::InferInputTensor,
};
use serde_json::{Value, json};
use tonic::metadata::{Ascii, MetadataValue};
use tonic::transport::Channel;

use super::protocol::Failure;

/// Metadata answers are small: a megabyte is ample, and a hostile server gets no further.
const MAX_METADATA: usize = 1 << 20;
/// The largest inference answer read (tonic's default, stated): past it the request fails as
/// `grpc_out_of_range`, and at most this much is buffered per request in flight.
const MAX_ANSWER: usize = 4 << 20;

/// The Authorization value as gRPC metadata, marked sensitive.
pub fn authorization(value: &str) -> anyhow::Result<MetadataValue<Ascii>> {
    let mut value = MetadataValue::try_from(value)
        .map_err(|_| anyhow::anyhow!("HEADROOM_ENDPOINT_AUTHORIZATION is not a valid header value"))?;
    value.set_sensitive(true);
    Ok(value)
}

/// One HTTP/2 connection to `base`, every call on it bounded by `timeout` (the load driver's
/// own deadline from the scheduled send is shorter or equal); an error names the URL without
/// secrets.
pub async fn connect(base: &str, shown: &str, timeout: std::time::Duration) -> anyhow::Result<Channel> {
    let connect = timeout.min(std::time::Duration::from_secs(10));
    let mut endpoint = tonic::transport::Endpoint::from_shared(base.to_string())
        .map_err(|_| anyhow::anyhow!("--target {shown} is not a gRPC address"))?
        .tcp_nodelay(true)
        .connect_timeout(connect)
        .timeout(timeout);
    if base.starts_with("https://") {
        endpoint = endpoint.tls_config(tonic::transport::ClientTlsConfig::new().with_webpki_roots())?;
    }
    // The TCP connect has its own limit; a TLS or HTTP/2 handshake that stalls needs this one.
    match tokio::time::timeout(connect * 2, endpoint.connect()).await {
        Ok(Ok(channel)) => Ok(channel),
        Ok(Err(_)) => bail!("cannot reach {shown}: connection refused or no route"),
        Err(_) => bail!("{shown} did not finish connecting within {:?}", connect * 2),
    }
}

fn request<T>(message: T, auth: Option<&MetadataValue<Ascii>>) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    if let Some(value) = auth {
        request.metadata_mut().insert("authorization", value.clone());
    }
    request
}

/// What the server says of itself and of the model: the software ("name version") and the
/// model's metadata in the shape the REST protocol gives it (`name`, `versions`, `inputs`).
pub async fn metadata(
    channel: &Channel,
    auth: Option<&MetadataValue<Ascii>>,
    shown: &str,
    name: &str,
    version: Option<&str>,
) -> anyhow::Result<(Option<String>, Value)> {
    let mut client = GrpcInferenceServiceClient::new(channel.clone()).max_decoding_message_size(MAX_METADATA);
    let server = client.server_metadata(request(ServerMetadataRequest {}, auth)).await.ok().map(|answer| {
        let answer = answer.into_inner();
        format!("{} {}", answer.name, answer.version).trim().to_string()
    });
    let asked = ModelMetadataRequest { name: name.to_string(), version: version.unwrap_or_default().to_string() };
    let model = match client.model_metadata(request(asked, auth)).await {
        Ok(answer) => answer.into_inner(),
        Err(status) => bail!(
            "{shown} answered ModelMetadata for '{}' with {}: {}",
            crate::upload::printable_within(name, 100),
            code_name(status.code()),
            crate::upload::printable_within(status.message(), 200)
        ),
    };
    let inputs: Vec<Value> =
        model.inputs.iter().map(|t| json!({"name": t.name, "datatype": t.datatype, "shape": t.shape})).collect();
    Ok((server, json!({"name": model.name, "versions": model.versions, "inputs": inputs})))
}

/// A V2 inference request in its JSON form (`{"inputs": [{name, shape, datatype, data}]}`, as
/// [`super::protocol::v2_request`] builds it or `--input FILE` gives it) as an encoded
/// `ModelInferRequest` with raw tensor contents.
pub fn infer_request(model: &str, version: Option<&str>, v2: &Value) -> anyhow::Result<Bytes> {
    use prost::Message;
    let inputs = v2.get("inputs").and_then(Value::as_array).context("the V2 request has no \"inputs\" list")?;
    let mut message = ModelInferRequest {
        model_name: model.to_string(),
        model_version: version.unwrap_or_default().to_string(),
        ..Default::default()
    };
    for (i, input) in inputs.iter().enumerate() {
        let field = |key: &str| input.get(key).with_context(|| format!("input {i} has no \"{key}\""));
        let name = field("name")?.as_str().with_context(|| format!("input {i}'s name is not text"))?;
        // Names and datatypes may come from the target's metadata: shown cleaned and short.
        let shown = crate::upload::printable_within(name, 100);
        let datatype = field("datatype")?.as_str().with_context(|| format!("input '{shown}': datatype is not text"))?;
        let shape: Vec<i64> = field("shape")?
            .as_array()
            .and_then(|dims| dims.iter().map(|d| d.as_i64().filter(|d| *d >= 0)).collect())
            .with_context(|| format!("input '{name}': shape is not a list of sizes"))?;
        let mut elements = Vec::new();
        flatten(field("data")?, &mut elements);
        let count = shape.iter().try_fold(1i64, |n, d| n.checked_mul(*d));
        anyhow::ensure!(
            count == Some(elements.len() as i64),
            "input '{shown}': shape {shape:?} holds {} elements, data has {}",
            count.map_or("too many".into(), |c| c.to_string()),
            elements.len()
        );
        let raw = raw_contents(datatype, &elements)
            .with_context(|| format!("input '{shown}' ({})", crate::upload::printable_within(datatype, 20)))?;
        message.inputs.push(InferInputTensor { name: name.to_string(), datatype: datatype.to_string(), shape });
        message.raw_input_contents.push(raw);
    }
    anyhow::ensure!(!message.inputs.is_empty(), "the V2 request's \"inputs\" list is empty");
    Ok(Bytes::from(message.encode_to_vec()))
}

/// V2 JSON allows `data` flat or nested row-major; the elements in order.
fn flatten<'a>(value: &'a Value, out: &mut Vec<&'a Value>) {
    match value {
        Value::Array(items) => items.iter().for_each(|item| flatten(item, out)),
        other => out.push(other),
    }
}

/// Elements as the protocol's raw bytes: little-endian at the datatype's width; BOOL one byte;
/// BYTES a 4-byte length and then the bytes.
fn raw_contents(datatype: &str, elements: &[&Value]) -> anyhow::Result<Bytes> {
    let mut out = Vec::new();
    for (i, element) in elements.iter().enumerate() {
        let bad = || anyhow::anyhow!("element {i} ({element}) is not a {datatype} value");
        let int = || element.as_i64().ok_or_else(bad);
        let uint = || element.as_u64().ok_or_else(bad);
        let float = || element.as_f64().ok_or_else(bad);
        let fits = |v: i64, lo: i64, hi: i64| if (lo..=hi).contains(&v) { Ok(v) } else { Err(bad()) };
        match datatype {
            "BOOL" => {
                out.push(u8::from(element.as_bool().or_else(|| element.as_u64().map(|v| v != 0)).ok_or_else(bad)?))
            }
            "INT8" => out.extend((fits(int()?, i8::MIN.into(), i8::MAX.into())? as i8).to_le_bytes()),
            "INT16" => out.extend((fits(int()?, i16::MIN.into(), i16::MAX.into())? as i16).to_le_bytes()),
            "INT32" => out.extend((fits(int()?, i32::MIN.into(), i32::MAX.into())? as i32).to_le_bytes()),
            "INT64" => out.extend(int()?.to_le_bytes()),
            "UINT8" => out.extend(u8::try_from(uint()?).map_err(|_| bad())?.to_le_bytes()),
            "UINT16" => out.extend(u16::try_from(uint()?).map_err(|_| bad())?.to_le_bytes()),
            "UINT32" => out.extend(u32::try_from(uint()?).map_err(|_| bad())?.to_le_bytes()),
            "UINT64" => out.extend(uint()?.to_le_bytes()),
            "FP16" => out.extend(half::f16::from_f64(float()?).to_le_bytes()),
            "BF16" => out.extend(half::bf16::from_f64(float()?).to_le_bytes()),
            "FP32" => out.extend((float()? as f32).to_le_bytes()),
            "FP64" => out.extend(float()?.to_le_bytes()),
            "BYTES" => {
                let text = element.as_str().ok_or_else(bad)?.as_bytes();
                out.extend(u32::try_from(text.len()).map_err(|_| bad())?.to_le_bytes());
                out.extend_from_slice(text);
            }
            _ => bail!("that datatype is not one the Open Inference Protocol defines"),
        }
    }
    Ok(Bytes::from(out))
}

/// Sends one encoded `ModelInfer` and reads the whole answer.
pub async fn send(channel: &Channel, auth: Option<&MetadataValue<Ascii>>, body: Bytes) -> Result<(), Failure> {
    let mut grpc = tonic::client::Grpc::new(channel.clone()).max_decoding_message_size(MAX_ANSWER);
    grpc.ready().await.map_err(|_| Failure::Connect)?;
    let path = tonic::codegen::http::uri::PathAndQuery::from_static(MODEL_INFER);
    match grpc.unary(request(body, auth), path, PreEncoded::<Skipped>::default()).await {
        Ok(_) => Ok(()),
        Err(status) => Err(Failure::Grpc(status.code() as i32)),
    }
}

/// A gRPC status code's name as a stable label: `not_found`, `unavailable`, …
pub fn code_name(code: tonic::Code) -> &'static str {
    use tonic::Code::*;
    match code {
        Ok => "ok",
        Cancelled => "cancelled",
        Unknown => "unknown",
        InvalidArgument => "invalid_argument",
        DeadlineExceeded => "deadline_exceeded",
        NotFound => "not_found",
        AlreadyExists => "already_exists",
        PermissionDenied => "permission_denied",
        ResourceExhausted => "resource_exhausted",
        FailedPrecondition => "failed_precondition",
        Aborted => "aborted",
        OutOfRange => "out_of_range",
        Unimplemented => "unimplemented",
        Internal => "internal",
        Unavailable => "unavailable",
        DataLoss => "data_loss",
        Unauthenticated => "unauthenticated",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;

    #[test]
    fn v2_json_becomes_raw_little_endian_tensors() {
        let v2 = json!({"inputs": [
            {"name": "x", "shape": [1, 2], "datatype": "FP32", "data": [[1.5, -2.0]]},
            {"name": "t", "shape": [2], "datatype": "BYTES", "data": ["hi", ""]},
            {"name": "b", "shape": [3], "datatype": "BOOL", "data": [true, false, 1]},
            {"name": "h", "shape": [1], "datatype": "FP16", "data": [1.0]},
        ]});
        let bytes = infer_request("digits", Some("2"), &v2).unwrap();
        let message = ModelInferRequest::decode(bytes).unwrap();
        assert_eq!((message.model_name.as_str(), message.model_version.as_str()), ("digits", "2"));
        assert_eq!(message.inputs[0].shape, vec![1, 2]);
        let floats: Vec<u8> = [1.5f32, -2.0].iter().flat_map(|f| f.to_le_bytes()).collect();
        assert_eq!(message.raw_input_contents[0].as_ref(), floats.as_slice());
        assert_eq!(message.raw_input_contents[1].as_ref(), b"\x02\0\0\0hi\0\0\0\0");
        assert_eq!(message.raw_input_contents[2].as_ref(), [1, 0, 1]);
        assert_eq!(message.raw_input_contents[3].as_ref(), [0x00, 0x3c], "1.0 in IEEE half precision");
    }

    #[test]
    fn requests_that_cannot_be_encoded_name_the_input() {
        let err = |v2: Value| infer_request("m", None, &v2).unwrap_err().to_string();
        let one = |datatype: &str, data: Value| json!({"inputs": [{"name": "x", "shape": [1], "datatype": datatype, "data": data}]});
        assert!(err(one("INT8", json!([300]))).contains("input 'x' (INT8)"));
        assert!(err(one("FP32", json!(["a"]))).contains("input 'x' (FP32)"));
        assert!(
            format!("{:#}", infer_request("m", None, &one("FP32", json!(["a"]))).unwrap_err()).contains("element 0")
        );
        assert!(err(one("COMPLEX", json!([1]))).contains("input 'x'"));
        let wrong_count = json!({"inputs": [{"name": "x", "shape": [2, 2], "datatype": "FP32", "data": [1.0]}]});
        assert!(err(wrong_count).contains("holds 4 elements, data has 1"));
        assert!(err(json!({"inputs": []})).contains("empty"));
        assert!(err(json!({})).contains("\"inputs\""));
    }
}

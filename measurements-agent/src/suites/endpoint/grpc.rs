//! `kserve-v2-grpc`: the Open Inference Protocol over gRPC (Triton, KServe, MLServer). The
//! server and model metadata come from `ServerMetadata` and `ModelMetadata`; every request is
//! one `ModelInfer` with its tensors in `raw_input_contents` (as Triton's own clients send
//! them), encoded once before the load starts and sent over one HTTP/2 connection.

use anyhow::bail;
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
    let mut message = ModelInferRequest {
        model_name: model.to_string(),
        model_version: version.unwrap_or_default().to_string(),
        ..Default::default()
    };
    for tensor in super::tensors::raw_tensors(v2)? {
        message.inputs.push(InferInputTensor { name: tensor.name, datatype: tensor.datatype, shape: tensor.shape });
        message.raw_input_contents.push(tensor.raw);
    }
    Ok(Bytes::from(message.encode_to_vec()))
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
    fn a_v2_request_becomes_one_model_infer_with_raw_contents() {
        let v2 = json!({"inputs": [
            {"name": "x", "shape": [1, 2], "datatype": "FP32", "data": [[1.5, -2.0]]},
            {"name": "t", "shape": [1], "datatype": "BYTES", "data": ["hi"]},
        ]});
        let bytes = infer_request("digits", Some("2"), &v2).unwrap();
        let message = ModelInferRequest::decode(bytes).unwrap();
        assert_eq!((message.model_name.as_str(), message.model_version.as_str()), ("digits", "2"));
        assert_eq!((message.inputs[0].name.as_str(), message.inputs[1].datatype.as_str()), ("x", "BYTES"));
        assert_eq!(message.inputs[0].shape, vec![1, 2]);
        let floats: Vec<u8> = [1.5f32, -2.0].iter().flat_map(|f| f.to_le_bytes()).collect();
        assert_eq!(message.raw_input_contents[0].as_ref(), floats.as_slice());
        assert_eq!(message.raw_input_contents[1].as_ref(), b"\x02\0\0\0hi");
        assert!(infer_request("m", None, &json!({"inputs": []})).is_err());
    }
}

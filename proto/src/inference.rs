//! The Open Inference Protocol's gRPC messages and client (`inference.GRPCInferenceService`),
//! and a codec that sends a request encoded once, ahead of time: a load generator should not
//! spend its time encoding the same message again for every request.

use std::marker::PhantomData;

use prost::bytes::{BufMut, Bytes};
use tonic::Status;
use tonic::codec::{Codec, EncodeBuf, Encoder};
use tonic_prost::ProstDecoder;

#[allow(clippy::all)]
mod pb {
    tonic::include_proto!("inference");
}

pub use pb::grpc_inference_service_client::GrpcInferenceServiceClient;
pub use pb::*;

/// The method path of `ModelInfer`.
pub const MODEL_INFER: &str = "/inference.GRPCInferenceService/ModelInfer";

/// An answer read to its end and checked to be protobuf, with every field skipped: a load
/// generator need not keep (nor allocate for) what the model answered.
#[derive(Clone, Copy, PartialEq, prost::Message)]
pub struct Skipped {}

/// Sends bytes that already are an encoded message; decodes the answer as `U`.
#[derive(Debug)]
pub struct PreEncoded<U>(PhantomData<fn() -> U>);

impl<U> Default for PreEncoded<U> {
    fn default() -> Self {
        PreEncoded(PhantomData)
    }
}

impl<U: prost::Message + Default + Send + 'static> Codec for PreEncoded<U> {
    type Encode = Bytes;
    type Decode = U;
    type Encoder = BytesEncoder;
    type Decoder = ProstDecoder<U>;

    fn encoder(&mut self) -> BytesEncoder {
        BytesEncoder
    }

    fn decoder(&mut self) -> ProstDecoder<U> {
        ProstDecoder::default()
    }
}

#[derive(Debug)]
pub struct BytesEncoder;

impl Encoder for BytesEncoder {
    type Item = Bytes;
    type Error = Status;

    fn encode(&mut self, item: Bytes, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        dst.put_slice(&item);
        Ok(())
    }
}

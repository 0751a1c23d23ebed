//! The protobuf codec of `headroom.v1`: prost's, except that bytes which are not the expected
//! message are the caller's error (INVALID_ARGUMENT, the gRPC 4xx) rather than INTERNAL, so
//! clients treat them as a bad request and do not retry them; and repeated fields past their
//! limits are RESOURCE_EXHAUSTED before anything is decoded.

use std::marker::PhantomData;

use prost::Message;
use tonic::Status;
use tonic::codec::{Codec, DecodeBuf, Decoder};
use tonic_prost::ProstEncoder;

use crate::limits::WireLimits;

/// Encodes `T`, decodes `U`.
#[derive(Debug)]
pub struct StrictCodec<T, U>(PhantomData<fn() -> (T, U)>);

impl<T, U> Default for StrictCodec<T, U> {
    fn default() -> Self {
        StrictCodec(PhantomData)
    }
}

impl<T, U> Codec for StrictCodec<T, U>
where
    T: Message + Send + 'static,
    U: Message + Default + WireLimits + Send + 'static,
{
    type Encode = T;
    type Decode = U;
    type Encoder = ProstEncoder<T>;
    type Decoder = StrictDecoder<U>;

    fn encoder(&mut self) -> Self::Encoder {
        ProstEncoder::default()
    }

    fn decoder(&mut self) -> Self::Decoder {
        StrictDecoder(PhantomData)
    }
}

/// Decodes `U`; a decoding failure is INVALID_ARGUMENT naming what was wrong.
#[derive(Debug)]
pub struct StrictDecoder<U>(PhantomData<fn() -> U>);

impl<U: Message + Default + WireLimits> Decoder for StrictDecoder<U> {
    type Item = U;
    type Error = Status;

    fn decode(&mut self, buf: &mut DecodeBuf<'_>) -> Result<Option<U>, Status> {
        use prost::bytes::Buf;
        // tonic hands over one whole message in one contiguous buffer.
        if buf.chunk().len() == buf.remaining() {
            U::check(buf.chunk()).map_err(|e| refused(Status::resource_exhausted(format!("too many entries: {e}"))))?;
        }
        U::decode(buf).map(Some).map_err(|e| refused(Status::invalid_argument(format!("malformed protobuf: {e}"))))
    }
}

/// The metadata key by which the server signs a refusal of the content itself (as the HTTP
/// door signs it with a header of the same name): only such a refusal is final for a client.
pub const REFUSAL_KEY: &str = "headroom-refusal";

fn refused(mut status: Status) -> Status {
    status.metadata_mut().insert(REFUSAL_KEY, tonic::metadata::MetadataValue::from_static("content"));
    status
}

//! The protobuf codec of `headroom.v1`: prost's, except that bytes which are not the expected
//! message are the caller's error (INVALID_ARGUMENT, the gRPC 4xx) rather than INTERNAL, so
//! clients treat them as a bad request and do not retry them; and repeated fields past their
//! limits are RESOURCE_EXHAUSTED before anything is decoded.

use std::marker::PhantomData;

use model::FieldError;
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
        // One whole message; split off tonic's buffer, not copied.
        let message = buf.copy_to_bytes(buf.remaining());
        decode_message(&message).map(Some)
    }
}

/// The wire half of decoding `U`, as the codec does it: the counts of repeated fields checked
/// before anything is allocated (RESOURCE_EXHAUSTED), then prost's decoding (INVALID_ARGUMENT).
/// Both refusals are signed as refusals of the content.
pub fn decode_message<U: Message + Default + WireLimits>(bytes: &[u8]) -> Result<U, Status> {
    U::check(bytes).map_err(|e| refused(Status::resource_exhausted(format!("too many entries: {e}"))))?;
    U::decode(bytes).map_err(|e| refused(Status::invalid_argument(format!("malformed protobuf: {e}"))))
}

/// A decoded message that breaks the model's rules: INVALID_ARGUMENT naming the field, signed as
/// a refusal of the content (the HTTP door answers the same with 422).
pub fn invalid_field(err: FieldError) -> Status {
    refused(Status::invalid_argument(format!("invalid field {err}")))
}

/// The metadata key by which the server signs a refusal of the content itself (as the HTTP
/// door signs it with a header of the same name): only such a refusal is final for a client.
pub const REFUSAL_KEY: &str = "headroom-refusal";

fn refused(mut status: Status) -> Status {
    status.metadata_mut().insert(REFUSAL_KEY, tonic::metadata::MetadataValue::from_static("content"));
    status
}

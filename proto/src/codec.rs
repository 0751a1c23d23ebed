//! The protobuf codec of `headroom.v1`: prost's, except that bytes which are not the expected
//! message are the caller's error (INVALID_ARGUMENT, the gRPC 4xx) rather than INTERNAL, so
//! clients treat them as a bad request and do not retry them.

use std::marker::PhantomData;

use prost::Message;
use tonic::Status;
use tonic::codec::{Codec, DecodeBuf, Decoder};
use tonic_prost::ProstEncoder;

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
    U: Message + Default + Send + 'static,
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

impl<U: Message + Default> Decoder for StrictDecoder<U> {
    type Item = U;
    type Error = Status;

    fn decode(&mut self, buf: &mut DecodeBuf<'_>) -> Result<Option<U>, Status> {
        U::decode(buf).map(Some).map_err(|e| Status::invalid_argument(format!("malformed protobuf: {e}")))
    }
}

//! The codec of every agentic service and client: prost, except that a message that does not
//! decode is `INVALID_ARGUMENT` (the sender's fault: truncated bytes, a wrong wire type,
//! values nested past the decoder's recursion limit) instead of tonic-prost's `INTERNAL`; and
//! its buffers start small (see [`buffers`]).

use std::marker::PhantomData;

use prost::Message;
use tonic::Status;
use tonic::codec::{BufferSettings, DecodeBuf};
use tonic_prost::ProstEncoder;

/// Each stream holds an encoding and a decoding buffer for its whole life, starting at this
/// size (tonic's default is 8 KiB): a gateway with 10,000 prompts streaming holds 30,000 of
/// them. They grow for a larger message like any `BytesMut`.
const BUFFER_BYTES: usize = 1024;
/// tonic's default: encoded messages handed to the transport at once.
const YIELD_THRESHOLD_BYTES: usize = 32 * 1024;

/// The buffer settings of every stream's encoder and decoder.
pub fn buffers() -> BufferSettings {
    BufferSettings::new(BUFFER_BYTES, YIELD_THRESHOLD_BYTES)
}

/// Named by the generated code (`tonic_prost_build`'s `codec_path`).
#[derive(Debug, Clone, Copy)]
pub struct Codec<T, U>(PhantomData<(T, U)>);

impl<T, U> Default for Codec<T, U> {
    fn default() -> Self {
        Codec(PhantomData)
    }
}

impl<T, U> tonic::codec::Codec for Codec<T, U>
where
    T: Message + Send + 'static,
    U: Message + Default + Send + 'static,
{
    type Encode = T;
    type Decode = U;
    type Encoder = ProstEncoder<T>;
    type Decoder = Decoder<U>;

    fn encoder(&mut self) -> Self::Encoder {
        ProstEncoder::new(buffers())
    }

    fn decoder(&mut self) -> Self::Decoder {
        Decoder(PhantomData)
    }
}

#[derive(Debug, Clone, Copy)]
pub struct Decoder<U>(PhantomData<U>);

impl<U: Message + Default> tonic::codec::Decoder for Decoder<U> {
    type Item = U;
    type Error = Status;

    fn decode(&mut self, buffer: &mut DecodeBuf<'_>) -> Result<Option<U>, Status> {
        U::decode(buffer).map(Some).map_err(|error| {
            Status::invalid_argument(format!("the message could not be decoded: {error}"))
        })
    }

    fn buffer_settings(&self) -> BufferSettings {
        buffers()
    }
}

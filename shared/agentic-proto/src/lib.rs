//! The gRPC contracts of agentic (`proto/agentic/v1`), generated at build time.

pub mod budget;
pub mod canonical;
pub mod codec;
mod events;
pub mod json;

#[allow(clippy::all)]
pub mod v1 {
    tonic::include_proto!("agentic.v1");
}

/// Encoded `FileDescriptorSet` of every agentic proto, for server reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] = tonic::include_file_descriptor_set!("agentic_descriptor");

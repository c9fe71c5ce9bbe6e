//! Compiles `proto/agentic/v1/*.proto` with the pure-Rust `protox` compiler (no system
//! `protoc`) and writes the descriptor set that server reflection serves.

use std::path::{Path, PathBuf};

use prost::Message;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../proto");
    let package_dir = root.join("agentic/v1");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&package_dir)?
        .filter_map(|entry| entry.ok().map(|entry| entry.path()))
        .filter(|path| path.extension().is_some_and(|ext| ext == "proto"))
        .collect();
    files.sort();

    // tonic-prost-build does not emit rerun-if-changed for protos; the directory entry
    // catches added or removed files.
    println!("cargo:rerun-if-changed={}", package_dir.display());
    for file in &files {
        println!("cargo:rerun-if-changed={}", file.display());
    }

    let descriptors = protox::compile(&files, [&root])?;
    let out_dir = PathBuf::from(std::env::var("OUT_DIR")?);
    std::fs::write(
        out_dir.join("agentic_descriptor.bin"),
        descriptors.encode_to_vec(),
    )?;
    // Our codec answers undecodable messages with INVALID_ARGUMENT (see src/codec.rs).
    tonic_prost_build::configure()
        .codec_path("crate::codec::Codec")
        .compile_fds(descriptors)?;
    Ok(())
}

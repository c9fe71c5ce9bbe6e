//! `make proto`: compiles `proto/agentic/v1/*.proto` with the pure-Rust `protox` compiler (no
//! system `protoc`) into the code `agentic-proto` includes (`agentic.v1.rs`, prost messages and
//! tonic clients and servers) and the descriptor set that server reflection serves and the
//! JSON faces read (`agentic_descriptor.bin`), both in `shared/agentic-proto/src/generated/`.

use std::error::Error;
use std::path::{Path, PathBuf};

use prost::Message;

fn main() -> Result<(), Box<dyn Error>> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let proto_root = root.join("proto");
    let package_dir = proto_root.join("agentic/v1");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&package_dir)?
        .filter_map(|entry| entry.ok().map(|entry| entry.path()))
        .filter(|path| path.extension().is_some_and(|extension| extension == "proto"))
        .collect();
    files.sort();

    let descriptors = protox::compile(&files, [&proto_root])?;
    let out_dir = root.join("shared/agentic-proto/src/generated");
    std::fs::create_dir_all(&out_dir)?;
    std::fs::write(
        out_dir.join("agentic_descriptor.bin"),
        descriptors.encode_to_vec(),
    )?;
    // Our codec answers undecodable messages with INVALID_ARGUMENT (see src/codec.rs).
    tonic_prost_build::configure()
        .codec_path("crate::codec::Codec")
        .out_dir(&out_dir)
        .compile_fds(descriptors)?;
    println!("wrote {}", out_dir.display());
    Ok(())
}

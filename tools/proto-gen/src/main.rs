//! `make proto`: compiles `proto/agentic/v1/*.proto` with the pure-Rust `protox` compiler (no
//! system `protoc`) into the code `agentic-proto` includes (`agentic.v1.rs`, prost messages and
//! tonic clients and servers) and the descriptor set that server reflection serves and the
//! JSON faces read (`agentic_descriptor.bin`), both in `shared/agentic-proto/src/generated/`.

use std::error::Error;
use std::path::{Path, PathBuf};


fn main() -> Result<(), Box<dyn Error>> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let proto_root = root.join("proto");
    let package_dir = proto_root.join("agentic/v1");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&package_dir)?
        .filter_map(|entry| entry.ok().map(|entry| entry.path()))
        .filter(|path| path.extension().is_some_and(|extension| extension == "proto"))
        .collect();
    files.sort();

    let mut compiler = protox::Compiler::new([&proto_root])?;
    compiler
        .include_source_info(true)
        .include_imports(true)
        .open_files(&files)?;
    let descriptors = compiler.file_descriptor_set();
    let out_dir = root.join("shared/agentic-proto/src/generated");
    std::fs::create_dir_all(&out_dir)?;
    // Encoded by protox itself, which keeps the options' extensions (the HTTP routes,
    // `google.api.http`); prost_types' copy drops them.
    std::fs::write(
        out_dir.join("agentic_descriptor.bin"),
        compiler.encode_file_descriptor_set(),
    )?;
    // Our codec answers undecodable messages with INVALID_ARGUMENT (see src/codec.rs).
    tonic_prost_build::configure()
        .codec_path("crate::codec::Codec")
        .out_dir(&out_dir)
        .compile_fds(descriptors)?;
    println!("wrote {}", out_dir.display());
    Ok(())
}

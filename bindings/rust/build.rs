//! Links the crate against `libferry.so`.
//!
//! The library directory comes from the `FERRY_LIB_DIR` environment variable and defaults to
//! `<crate dir>/../../build`, where `cmake -B build && cmake --build build` puts it. The
//! directory is also written into the rpath of this package's binaries (tests, examples), so
//! they start without `LD_LIBRARY_PATH`. Crates that depend on `ferry` get the link search path
//! but must set their own rpath (or install the library on the loader path): Cargo does not
//! pass `rustc-link-arg` on to dependents.

use std::env;
use std::path::{Path, PathBuf};

fn main() {
    println!("cargo:rerun-if-env-changed=FERRY_LIB_DIR");
    println!("cargo:rerun-if-changed=build.rs");

    let manifest_dir =
        PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let dir = match env::var_os("FERRY_LIB_DIR") {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => manifest_dir.join("..").join("..").join("build"),
    };
    // An absolute, normalised path: the rpath must not depend on the working directory.
    let dir = dir.canonicalize().unwrap_or_else(|_| absolute(&manifest_dir, &dir));

    if !dir.join("libferry.so").exists() {
        println!(
            "cargo:warning=libferry.so not found in {} (build it with `cmake -B build && cmake --build build`, or set FERRY_LIB_DIR)",
            dir.display()
        );
    }

    let dir = dir.display();
    println!("cargo:rustc-link-search=native={dir}");
    println!("cargo:rustc-link-lib=dylib=ferry");
    println!("cargo:rustc-link-arg=-Wl,-rpath,{dir}");
    // For dependents' build scripts (`DEP_FERRY_LIB_DIR`), thanks to `links = "ferry"`.
    println!("cargo:lib_dir={dir}");
}

fn absolute(base: &Path, p: &Path) -> PathBuf {
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        base.join(p)
    }
}

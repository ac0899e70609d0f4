// Finds libdetinfer with pkg-config (run directly: no crates), as a C program
// would; DETINFER_LIB_DIR overrides it. Dependents' build scripts see the
// directory as DEP_DETINFER_LIBDIR.
use std::env;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    println!("cargo:rerun-if-env-changed=DETINFER_LIB_DIR");
    let dir = match env::var("DETINFER_LIB_DIR") {
        Ok(dir) => Some(dir),
        Err(_) => pkg_config_libdir(),
    };
    if let Some(dir) = dir {
        println!("cargo:rustc-link-search=native={dir}");
        println!("cargo:libdir={dir}");
    }
    println!("cargo:rustc-link-lib=dylib=detinfer");
}

fn pkg_config_libdir() -> Option<String> {
    let out = match Command::new("pkg-config").args(["--libs-only-L", "detinfer"]).output() {
        Ok(out) => out,
        Err(e) => panic!("pkg-config could not be run ({e}): install pkg-config, or set DETINFER_LIB_DIR"),
    };
    if !out.status.success() {
        panic!(
            "pkg-config does not know detinfer: install libdetinfer (make install), set PKG_CONFIG_PATH \
             to its lib/pkgconfig, or set DETINFER_LIB_DIR\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // the first -L; none when the library is in a directory the linker searches anyway
    String::from_utf8_lossy(&out.stdout).split_whitespace().find_map(|f| f.strip_prefix("-L").map(String::from))
}

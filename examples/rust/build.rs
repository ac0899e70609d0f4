// Finds libdetinfer with pkg-config (as a C program would) and links it.
use std::process::Command;

fn main() {
    let out = Command::new("pkg-config")
        .args(["--libs-only-L", "detinfer"])
        .output()
        .expect("pkg-config is needed to find libdetinfer");
    assert!(out.status.success(), "pkg-config does not know detinfer: set PKG_CONFIG_PATH");
    for flag in String::from_utf8_lossy(&out.stdout).split_whitespace() {
        if let Some(dir) = flag.strip_prefix("-L") {
            println!("cargo:rustc-link-search=native={dir}");
            println!("cargo:rustc-link-arg=-Wl,-rpath,{dir}");
        }
    }
    println!("cargo:rustc-link-lib=dylib=detinfer");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
}

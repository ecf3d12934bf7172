//! The shared library's SONAME on Linux: `libcorun.so.<major>` from 1.0 on, and
//! `libcorun.so.0.<minor>` before it (where a minor version may break the ABI), as cargo-c
//! names them. Without it a program linked with `-lcorun` records `NEEDED libcorun.so`,
//! which no versioned install provides.
fn main() {
    let major: u32 = env!("CARGO_PKG_VERSION_MAJOR").parse().unwrap_or(0);
    let minor = env!("CARGO_PKG_VERSION_MINOR");
    let soname =
        if major == 0 { format!("libcorun.so.0.{minor}") } else { format!("libcorun.so.{major}") };
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,{soname}");
    }
    println!("cargo:rerun-if-changed=build.rs");
}

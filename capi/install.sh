#!/usr/bin/env bash
# Installs the C library into PREFIX, as cargo-c's `cargo cinstall` would, with nothing
# to install first but cargo (cargo-c takes about 17 minutes to build here):
#
#   PREFIX/include/corun.h
#   PREFIX/lib/libcorun.a                           static, debug info stripped
#   PREFIX/lib/libcorun.so.0.2.0                    shared, SONAME libcorun.so.0.2
#   PREFIX/lib/libcorun.so.0.2 -> libcorun.so.0.2.0, libcorun.so -> libcorun.so.0.2
#   PREFIX/lib/pkgconfig/corun.pc                   pkg-config --cflags --libs corun
#   PREFIX/lib/pkgconfig/corun-static.pc            ... corun-static (libcorun.a)
#   PREFIX/lib/cmake/corun/corunConfig.cmake        find_package(corun): corun::corun
#   PREFIX/lib/cmake/corun/corunConfigVersion.cmake   (shared), corun::static
#   PREFIX/share/doc/corun/                         README.md, the licences
#
#   bash capi/install.sh /usr/local       (or any prefix; DESTDIR is honoured)
#
# The prefix is relocatable: the .pc files and the CMake package find it from their own
# place, so a copied or unpacked prefix works as it is. A program linked by corun.pc
# carries an rpath to the prefix's lib/, so it starts without LD_LIBRARY_PATH from any
# prefix; for a prefix the dynamic loader searches (/usr/local/lib on Debian), this runs
# ldconfig when it can (root, no DESTDIR), for programs linked without the .pc.
set -euo pipefail
if [ $# -ne 1 ] || [ "$1" = --help ]; then sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit $(($# != 1)); fi
prefix=$1
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
command -v cargo >/dev/null || { echo "install.sh: cargo is required (https://rustup.rs)" >&2; exit 1; }
command -v strip >/dev/null || { echo "install.sh: strip is required (Debian: binutils)" >&2; exit 1; }
version=$(sed -n 's/^version = "\(.*\)"/\1/p' "$here/Cargo.toml" | head -1)
major=${version%%.*}
minor=$(echo "$version" | cut -d. -f2)
if [ "$major" = 0 ]; then soname=libcorun.so.0.$minor; else soname=libcorun.so.$major; fi
target=${CARGO_TARGET_DIR:-$root/target}
cargo build -q -p corun-capi --release --manifest-path "$root/Cargo.toml"
dest=${DESTDIR:-}$prefix
mkdir -p "$dest/include" "$dest/lib/pkgconfig" "$dest/lib/cmake/corun" "$dest/share/doc/corun"
install -m 644 "$here/README.md" "$here/LICENSE" "$here/LICENSE-MIT" "$here/LICENSE-APACHE" "$dest/share/doc/corun/"
install -m 644 "$here/include/corun.h" "$dest/include/corun.h"
install -m 644 "$target/release/libcorun.a" "$dest/lib/libcorun.a"
strip --strip-debug "$dest/lib/libcorun.a"
install -m 755 "$target/release/libcorun.so" "$dest/lib/libcorun.so.$version"
strip --strip-unneeded "$dest/lib/libcorun.so.$version"
ln -sf "libcorun.so.$version" "$dest/lib/$soname"
ln -sf "$soname" "$dest/lib/libcorun.so"
# What a static link needs beside libcorun.a (Rust's std on Linux).
private="-lgcc_s -lutil -lrt -lpthread -lm -ldl -lc"
# ${pcfiledir} is where pkg-config found the file: PREFIX/lib/pkgconfig, wherever the
# prefix is now.
pc_head='prefix=${pcfiledir}/../..
exec_prefix=${prefix}
libdir=${exec_prefix}/lib
includedir=${prefix}/include
'
summary="Concurrent contiguous runs in paired page-index arrays, and RDMA transfer descriptors"
# The rpath lets the program find libcorun.so.* where it was linked, with no ldconfig or
# LD_LIBRARY_PATH (the loader does not search a custom prefix).
cat >"$dest/lib/pkgconfig/corun.pc" <<PC
$pc_head
Name: corun
Description: $summary
Version: $version
Libs: -L\${libdir} -Wl,-rpath,\${libdir} -lcorun
Libs.private: $private
Cflags: -I\${includedir}
PC
# Static: the archive by its path (-lcorun would take the shared library beside it).
cat >"$dest/lib/pkgconfig/corun-static.pc" <<PC
$pc_head
Name: corun-static
Description: $summary (static library)
Version: $version
Libs: \${libdir}/libcorun.a $private
Cflags: -I\${includedir}
PC
cat >"$dest/lib/cmake/corun/corunConfig.cmake" <<CMAKE
# find_package(corun) for corun $version: corun::corun (shared) and corun::static.
get_filename_component(_corun_prefix "\${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)
if(NOT TARGET corun::corun)
  add_library(corun::corun SHARED IMPORTED)
  set_target_properties(corun::corun PROPERTIES
    IMPORTED_LOCATION "\${_corun_prefix}/lib/libcorun.so.$version"
    IMPORTED_SONAME "$soname"
    INTERFACE_INCLUDE_DIRECTORIES "\${_corun_prefix}/include")
  add_library(corun::static STATIC IMPORTED)
  set_target_properties(corun::static PROPERTIES
    IMPORTED_LOCATION "\${_corun_prefix}/lib/libcorun.a"
    INTERFACE_INCLUDE_DIRECTORIES "\${_corun_prefix}/include"
    INTERFACE_LINK_LIBRARIES "gcc_s;util;rt;pthread;m;dl")
endif()
set(corun_VERSION $version)
unset(_corun_prefix)
CMAKE
cat >"$dest/lib/cmake/corun/corunConfigVersion.cmake" <<CMAKE
# Compatible: the same major version (for 0.x, the same minor), not older than asked.
set(PACKAGE_VERSION "$version")
if(PACKAGE_FIND_VERSION VERSION_GREATER PACKAGE_VERSION)
  set(PACKAGE_VERSION_COMPATIBLE FALSE)
elseif("$major" STREQUAL "0" AND NOT PACKAGE_FIND_VERSION_MINOR STREQUAL "$minor")
  set(PACKAGE_VERSION_COMPATIBLE FALSE)
elseif(NOT "$major" STREQUAL "0" AND NOT PACKAGE_FIND_VERSION_MAJOR STREQUAL "$major")
  set(PACKAGE_VERSION_COMPATIBLE FALSE)
else()
  set(PACKAGE_VERSION_COMPATIBLE TRUE)
  if(PACKAGE_FIND_VERSION STREQUAL PACKAGE_VERSION)
    set(PACKAGE_VERSION_EXACT TRUE)
  endif()
endif()
CMAKE
echo "installed corun $version into $dest (SONAME $soname)"
# Programs linked without corun.pc's rpath (CMake strips its rpath on install, a bare
# -lcorun) find the library through the loader's cache, where its directory is one it
# searches: refresh the cache, or say that it was not.
if grep -qsx "$prefix/lib" /etc/ld.so.conf /etc/ld.so.conf.d/*.conf; then
  if [ -z "${DESTDIR:-}" ] && [ "$(id -u)" = 0 ] && command -v ldconfig >/dev/null; then
    ldconfig && echo "ran ldconfig: $prefix/lib is in the loader's cache"
  else
    echo "note: run ldconfig (as root) for programs linked without corun.pc's rpath"
  fi
fi

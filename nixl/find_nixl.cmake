# Finds an installed NIXL (its headers, libnixl and the Abseil it was built
# with) under NIXL_PREFIX or the default paths.  Sets TP_NIXL_FOUND,
# TP_NIXL_INCLUDE_DIR(S), TP_NIXL_LIBDIR, TP_NIXL_LIBS, or TP_NIXL_MISSING.
set(TP_NIXL_FOUND OFF)
# A new NIXL_PREFIX is looked in again, not answered from the cache.
if(NOT "${NIXL_PREFIX}" STREQUAL "${TP_NIXL_PREFIX_SEEN}")
  unset(TP_NIXL_INCLUDE_DIR CACHE)
  unset(TP_NIXL_LIB CACHE)
  unset(TP_NIXL_BUILD_LIB CACHE)
  unset(absl_DIR CACHE)
  set(TP_NIXL_PREFIX_SEEN "${NIXL_PREFIX}" CACHE INTERNAL "NIXL_PREFIX of the last search")
endif()
set(tp_hints)
if(NIXL_PREFIX)
  set(tp_hints HINTS ${NIXL_PREFIX}/include)
endif()
find_path(TP_NIXL_INCLUDE_DIR backend/backend_plugin.h ${tp_hints})
set(tp_lhints)
if(NIXL_PREFIX)
  set(tp_lhints HINTS ${NIXL_PREFIX}/lib/${CMAKE_LIBRARY_ARCHITECTURE} ${NIXL_PREFIX}/lib
    ${NIXL_PREFIX}/lib64)
endif()
find_library(TP_NIXL_LIB nixl ${tp_lhints})
find_library(TP_NIXL_BUILD_LIB nixl_build ${tp_lhints})
if(NOT TP_NIXL_INCLUDE_DIR)
  set(TP_NIXL_MISSING "no include/backend/backend_plugin.h")
  return()
endif()
if(NOT TP_NIXL_LIB OR NOT TP_NIXL_BUILD_LIB)
  set(TP_NIXL_MISSING "no libnixl.so and libnixl_build.so beside ${TP_NIXL_INCLUDE_DIR}")
  return()
endif()
get_filename_component(TP_NIXL_LIBDIR ${TP_NIXL_LIB} DIRECTORY)
get_filename_component(tp_nixl_root ${TP_NIXL_INCLUDE_DIR} DIRECTORY)

# NIXL's logging header is Abseil's LOG(): the plugin compiles and links
# against the very Abseil that libnixl uses (a second copy would not share
# its log settings).  Looked for in the NIXL prefix first, then CMake's
# usual places and PKG_CONFIG_PATH's prefixes.
find_package(absl CONFIG QUIET HINTS ${tp_nixl_root} ${NIXL_PREFIX})
if(NOT absl_FOUND)
  set(TP_NIXL_MISSING "no Abseil CMake package beside NIXL (absl_DIR)")
  return()
endif()
set(TP_NIXL_INCLUDE_DIRS ${TP_NIXL_INCLUDE_DIR} ${TP_NIXL_INCLUDE_DIR}/utils)
set(TP_NIXL_LIBS ${TP_NIXL_LIB} ${TP_NIXL_BUILD_LIB} absl::log absl::check absl::strings)
set(TP_NIXL_FOUND ON)

# Finds an installed NIXL (its headers, libnixl and the Abseil it was built
# with) under NIXL_PREFIX or the default paths.  Sets TP_NIXL_FOUND,
# TP_NIXL_INCLUDE_DIR(S), TP_NIXL_LIBDIR, TP_NIXL_LIBS, or TP_NIXL_MISSING
# (and TP_NIXL_FIX: what to do, where NIXL was found but cannot be used).
set(TP_NIXL_FOUND OFF)
set(TP_NIXL_FIX "")
# A new NIXL_PREFIX is looked in again, not answered from the cache.  An
# absl_DIR the user gave is kept; only one this search found is forgotten.
if(NOT "${NIXL_PREFIX}" STREQUAL "${TP_NIXL_PREFIX_SEEN}")
  unset(TP_NIXL_INCLUDE_DIR CACHE)
  unset(TP_NIXL_LIB CACHE)
  unset(TP_NIXL_BUILD_LIB CACHE)
  if(TP_NIXL_ABSL_DIR_FOUND AND "${absl_DIR}" STREQUAL "${TP_NIXL_ABSL_DIR_FOUND}")
    unset(absl_DIR CACHE)
  endif()
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
# against the very Abseil that libnixl uses (another one fails to link, or
# to load, or would not share its log settings).  Looked for in the NIXL
# prefix first (where NIXL's build installs the one it built), then
# absl_DIR and CMake's usual places.
set(tp_user_absl OFF)
if(absl_DIR AND NOT "${absl_DIR}" STREQUAL "${TP_NIXL_ABSL_DIR_FOUND}")
  set(tp_user_absl ON) # given on the command line: never cleared
endif()
find_package(absl CONFIG QUIET HINTS ${tp_nixl_root} ${NIXL_PREFIX}
  PATHS ${TP_NIXL_LIBDIR}/cmake/absl ${tp_nixl_root}/lib/cmake/absl)
set(tp_absl_fix "give -Dabsl_DIR=<the Abseil NIXL was built with>/lib/cmake/absl (NIXL's \
meson build uses pkg-config's absl_log, else its own copy: install that copy, or build \
Abseil 20230125 or later and NIXL against it)")
if(NOT absl_FOUND)
  set(TP_NIXL_MISSING "NIXL at ${tp_nixl_root}, but no Abseil CMake package (absl_DIR)")
  set(TP_NIXL_FIX "${tp_absl_fix}")
  return()
endif()
if(NOT TARGET absl::log OR NOT TARGET absl::log_internal_message)
  set(TP_NIXL_MISSING "the Abseil found (${absl_DIR}, version ${absl_VERSION}) has no absl::log: \
it is not the Abseil NIXL was built with")
  set(TP_NIXL_FIX "${tp_absl_fix}")
  unset(absl_FOUND)
  return()
endif()
# The Abseil libnixl.so loads (its NEEDED entry) must be the one found.
if(CMAKE_READELF)
  execute_process(COMMAND ${CMAKE_READELF} -d ${TP_NIXL_LIB} OUTPUT_VARIABLE tp_dyn
    ERROR_QUIET RESULT_VARIABLE tp_rc)
  string(REGEX MATCH "libabsl_log_internal_message\\.so[.0-9]*" tp_nixl_absl "${tp_dyn}")
  set(tp_found_absl "")
  foreach(cfg RELEASE RELWITHDEBINFO NOCONFIG DEBUG MINSIZEREL)
    get_target_property(tp_soname absl::log_internal_message IMPORTED_SONAME_${cfg})
    if(tp_soname)
      set(tp_found_absl "${tp_soname}")
      break()
    endif()
  endforeach()
  if(tp_nixl_absl AND tp_found_absl AND NOT tp_nixl_absl STREQUAL tp_found_absl)
    set(TP_NIXL_MISSING "${TP_NIXL_LIB} loads ${tp_nixl_absl}, but the Abseil found \
(${absl_DIR}, version ${absl_VERSION}) is ${tp_found_absl}")
    set(TP_NIXL_FIX "${tp_absl_fix}")
    return()
  endif()
endif()
if(tp_user_absl)
  set(TP_NIXL_ABSL_DIR_FOUND "" CACHE INTERNAL "absl_DIR the NIXL search found")
else()
  set(TP_NIXL_ABSL_DIR_FOUND "${absl_DIR}" CACHE INTERNAL "absl_DIR the NIXL search found")
endif()
set(TP_NIXL_INCLUDE_DIRS ${TP_NIXL_INCLUDE_DIR} ${TP_NIXL_INCLUDE_DIR}/utils)
set(TP_NIXL_LIBS ${TP_NIXL_LIB} ${TP_NIXL_BUILD_LIB} absl::log absl::check absl::strings)
set(TP_NIXL_FOUND ON)

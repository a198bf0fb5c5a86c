# Warnings apply to inferd's own targets only (generated protobuf code is exempt).
function(inferd_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Werror -Wno-error=deprecated-declarations
    -Wno-missing-field-initializers  # designated initialisers rely on member defaults
    -Wno-restrict)                   # GCC 12 false positive on std::string concatenation at -O3 (PR105329)
endfunction()

# One library per subsystem: inferd_library(NAME SOURCES... DEPS ...)
function(inferd_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_library(${name} STATIC ${ARG_SOURCES})
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(${name} PUBLIC ${ARG_DEPS})
  inferd_warnings(${name})
endfunction()

# klaunch.cmake -- klaunch kernel families in a CMake project (CMake >= 3.20).
#
#   include(<klaunch>/cmake/klaunch.cmake)
#   # or: find_package(klaunch CONFIG REQUIRED PATHS <klaunch>/cmake)
#
#   klaunch_add_family(<family>
#     SPEC <family>.yaml            # the spec (the file is named after its family)
#     SOURCES <kernel.cu>...        # the family's kernels, one unity file per variant
#     VARIANTS <variant>...         # as the spec names them
#     [HEADERS <file>...]           # headers the kernels include (rebuild when they change)
#     [ARCHS 80 90 ...]             # SM numbers: a cubin each, plus PTX of the last;
#                                   # default ${KLAUNCH_ARCHS} (80 90 100 120)
#     [NVCC_FLAGS <flag>...]
#     [PYTHON])                     # also the Python launchers (docs/PYTHON.md)
#
# makes, in ${CMAKE_CURRENT_BINARY_DIR}/klaunch_<family>/:
#   include/klaunch/<family>.h, .cuh   the generator's output (klaunch-gen)
#   <family>_<variant>.fatbin          nvcc -fatbin of the unity file
#                                      bazel/write_unity.py writes (as klaunch's
#                                      Bazel rule: each kernel checked against
#                                      the spec after its definition)
#   <family>_fatbins.h, .c             the fatbins embedded (bazel/embed_fatbins.py):
#                                      kl_fatbin_<family>_<variant>[], _size
#   python/klaunch_<family>.py, python/libklaunch_<family>.so
#                                      with PYTHON: the Python launchers and their
#                                      library, the fatbins embedded; import with
#                                      python/ and klaunch's runtime package
#                                      (pip install <klaunch>/python, or
#                                      <klaunch>/python) on sys.path
# and the targets
#   <family>_klaunch   STATIC library: the embedded fatbins; its include
#                      directories give klaunch/<family>.h and <family>_fatbins.h;
#                      links klaunch::runtime
#   klaunch::runtime   INTERFACE library: klaunch's include/ and -ldl (the CUDA
#                      backend dlopens libcuda.so.1: nothing CUDA to link)
#   <family>_python    with PYTHON: MODULE library libklaunch_<family>.so
#                      (target property KLAUNCH_PYTHON_DIR: its folder)
#
# One C file of each program defines KLAUNCH_IMPLEMENTATION before including
# klaunch's headers. Without nvcc the fatbins are empty files (loading one
# gives KL_ERROR_INVALID_IMAGE); the recording backend needs none.
#
# Cache variables:
#   KLAUNCH_GEN     the generator command: klaunch-gen (pip install <klaunch>/codegen)
#                   found on PATH, else "<python> <klaunch>/codegen/main.py"
#   KLAUNCH_PYTHON  python3 for write_unity.py and embed_fatbins.py
#   KLAUNCH_NVCC    nvcc ($CUDA_PATH/bin, PATH, /usr/local/cuda/bin); empty: none
#   KLAUNCH_ARCHS   the default ARCHS
include_guard(GLOBAL)
cmake_minimum_required(VERSION 3.20)

get_filename_component(KLAUNCH_ROOT "${CMAKE_CURRENT_LIST_DIR}/.." ABSOLUTE)

find_package(Python3 COMPONENTS Interpreter QUIET)
set(KLAUNCH_PYTHON "${Python3_EXECUTABLE}" CACHE FILEPATH "python3 for klaunch's build scripts")
if(NOT KLAUNCH_PYTHON)
  message(FATAL_ERROR "klaunch: no python3 found; set KLAUNCH_PYTHON")
endif()

find_program(_klaunch_gen_found klaunch-gen)
if(_klaunch_gen_found)
  set(_klaunch_gen_default "${_klaunch_gen_found}")
else()
  set(_klaunch_gen_default "${KLAUNCH_PYTHON};${KLAUNCH_ROOT}/codegen/main.py")
endif()
set(KLAUNCH_GEN "${_klaunch_gen_default}" CACHE STRING "the klaunch generator command (klaunch-gen)")

find_program(KLAUNCH_NVCC nvcc HINTS "$ENV{CUDA_PATH}/bin" /usr/local/cuda/bin)
set(KLAUNCH_ARCHS 80 90 100 120 CACHE STRING "default target SM numbers of klaunch_add_family")

if(NOT TARGET klaunch::runtime)
  add_library(klaunch_runtime INTERFACE)
  target_include_directories(klaunch_runtime INTERFACE "${KLAUNCH_ROOT}/include")
  target_link_libraries(klaunch_runtime INTERFACE ${CMAKE_DL_LIBS})
  add_library(klaunch::runtime ALIAS klaunch_runtime)
endif()

function(klaunch_add_family family)
  cmake_parse_arguments(PARSE_ARGV 1 KL "PYTHON" "SPEC" "SOURCES;VARIANTS;HEADERS;ARCHS;NVCC_FLAGS")
  if(KL_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "klaunch_add_family(${family}): unknown arguments ${KL_UNPARSED_ARGUMENTS}")
  endif()
  foreach(required SPEC SOURCES VARIANTS)
    if(NOT KL_${required})
      message(FATAL_ERROR "klaunch_add_family(${family}): ${required} is required")
    endif()
  endforeach()
  get_filename_component(spec "${KL_SPEC}" ABSOLUTE)
  get_filename_component(spec_name "${spec}" NAME)
  get_filename_component(spec_dir "${spec}" DIRECTORY)
  if(NOT spec_name STREQUAL "${family}.yaml")
    message(FATAL_ERROR "klaunch_add_family(${family}): the spec must be named ${family}.yaml, not ${spec_name}")
  endif()
  if(NOT KL_ARCHS)
    set(KL_ARCHS ${KLAUNCH_ARCHS})
  endif()

  set(out "${CMAKE_CURRENT_BINARY_DIR}/klaunch_${family}")
  set(inc "${out}/include")
  set(h "${inc}/klaunch/${family}.h")
  set(cuh "${inc}/klaunch/${family}.cuh")
  set(pydir "${out}/python")
  set(py "${pydir}/klaunch_${family}.py")
  set(py_c "${pydir}/klaunch_${family}.c")

  # The generator, run beside the spec so that files and messages name it
  # as <family>.yaml; touch: it leaves a file whose bytes are right alone.
  # The Python launchers come from the same run.
  file(GLOB gen_deps "${KLAUNCH_ROOT}/codegen/klaunch_codegen/*.py" "${KLAUNCH_ROOT}/codegen/klaunch_codegen/templates/*.j2")
  add_custom_command(
    OUTPUT "${h}" "${cuh}" "${py}" "${py_c}"
    COMMAND ${KLAUNCH_GEN} --include-dir "${inc}" --python-dir "${pydir}" "${spec_name}"
    COMMAND "${CMAKE_COMMAND}" -E touch "${h}" "${cuh}" "${py}" "${py_c}"
    WORKING_DIRECTORY "${spec_dir}"
    DEPENDS "${spec}" ${gen_deps}
    COMMENT "klaunch: generating the launchers of ${family}"
    VERBATIM)

  set(srcs "")
  foreach(s IN LISTS KL_SOURCES)
    get_filename_component(abs "${s}" ABSOLUTE)
    list(APPEND srcs "${abs}")
  endforeach()
  set(hdrs "")
  foreach(s IN LISTS KL_HEADERS)
    get_filename_component(abs "${s}" ABSOLUTE)
    list(APPEND hdrs "${abs}")
  endforeach()

  set(gencode "")
  foreach(a IN LISTS KL_ARCHS)
    list(APPEND gencode -gencode "arch=compute_${a},code=sm_${a}")
  endforeach()
  list(GET KL_ARCHS -1 last)
  list(APPEND gencode -gencode "arch=compute_${last},code=compute_${last}")

  set(fatbins "")
  set(embed_args "")
  foreach(v IN LISTS KL_VARIANTS)
    set(unity "${out}/${family}_${v}.cu")
    set(fatbin "${out}/${family}_${v}.fatbin")
    add_custom_command(
      OUTPUT "${unity}"
      COMMAND "${KLAUNCH_PYTHON}" "${KLAUNCH_ROOT}/bazel/write_unity.py"
              --label "klaunch_add_family(${family})" --family "${family}" --variant "${v}"
              --spec "${spec}" --out "${unity}" --source-hash ${srcs} ${hdrs} "${cuh}" -- ${srcs}
      DEPENDS ${srcs} ${hdrs} "${cuh}" "${spec}" "${KLAUNCH_ROOT}/bazel/write_unity.py"
      COMMENT "klaunch: unity file of ${family} variant ${v}"
      VERBATIM)
    if(KLAUNCH_NVCC)
      add_custom_command(
        OUTPUT "${fatbin}"
        COMMAND "${KLAUNCH_NVCC}" -fatbin -O3 -std=c++17 ${gencode} -I "${inc}" ${KL_NVCC_FLAGS}
                -o "${fatbin}" "${unity}"
        DEPENDS "${unity}" ${srcs} ${hdrs} "${cuh}"
        COMMENT "klaunch: compiling ${family} variant ${v} (sm ${KL_ARCHS})"
        VERBATIM)
    else()
      add_custom_command(
        OUTPUT "${fatbin}"
        COMMAND "${CMAKE_COMMAND}" -E touch "${fatbin}"
        DEPENDS "${unity}"
        COMMENT "klaunch: no nvcc: ${family}_${v}.fatbin is an empty file"
        VERBATIM)
    endif()
    list(APPEND fatbins "${fatbin}")
    list(APPEND embed_args "${v}=${fatbin}")
  endforeach()

  add_custom_command(
    OUTPUT "${out}/${family}_fatbins.h" "${out}/${family}_fatbins.c"
    COMMAND "${KLAUNCH_PYTHON}" "${KLAUNCH_ROOT}/bazel/embed_fatbins.py"
            --symbol-prefix "kl_fatbin_${family}" --header "${out}/${family}_fatbins.h"
            --header-include "${family}_fatbins.h" --source "${out}/${family}_fatbins.c"
            --label "klaunch_add_family(${family})" ${embed_args}
    DEPENDS ${fatbins} "${KLAUNCH_ROOT}/bazel/embed_fatbins.py"
    COMMENT "klaunch: embedding the fatbins of ${family}"
    VERBATIM)

  add_library(${family}_klaunch STATIC "${out}/${family}_fatbins.c" "${out}/${family}_fatbins.h" "${h}")
  target_include_directories(${family}_klaunch PUBLIC "${inc}" "${out}")
  target_link_libraries(${family}_klaunch PUBLIC klaunch::runtime)
  # (_Alignas in the embedded bytes: C11)
  set_target_properties(${family}_klaunch PROPERTIES LINKER_LANGUAGE C C_STANDARD 11 C_STANDARD_REQUIRED ON)

  if(KL_PYTHON)
    # libklaunch_<family>.so beside klaunch_<family>.py; only its kl__py_*
    # and kl__X_py entry points exported (klaunch/python_abi.h).
    set_target_properties(${family}_klaunch PROPERTIES POSITION_INDEPENDENT_CODE ON)
    add_library(${family}_python MODULE "${py_c}" "${py}")
    target_compile_definitions(${family}_python PRIVATE KL_PYTHON_EMBED_FATBINS)
    target_link_libraries(${family}_python PRIVATE ${family}_klaunch)
    set_target_properties(${family}_python PROPERTIES
      OUTPUT_NAME "klaunch_${family}" PREFIX "lib" SUFFIX ".so"
      LIBRARY_OUTPUT_DIRECTORY "${pydir}"
      C_STANDARD 11 C_STANDARD_REQUIRED ON C_VISIBILITY_PRESET hidden
      KLAUNCH_PYTHON_DIR "${pydir}")
  endif()
endfunction()

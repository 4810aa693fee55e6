# Builds the consumer project (this folder) against minigrad, one of two ways (and runs it, installed):
#   cmake -DMODE=subdirectory -DSOURCE=<minigrad source> -DWORK=<scratch dir> -P run.cmake
#   cmake -DMODE=installed -DSOURCE=<minigrad source> -DBUILD=<minigrad build> -DWORK=<scratch dir> -P run.cmake
# "installed" first runs cmake --install of minigrad's build into WORK/prefix, an empty prefix.
cmake_policy(VERSION 3.25)
file(REMOVE_RECURSE ${WORK})
set(here ${CMAKE_CURRENT_LIST_DIR})
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGN}")
  endif()
endfunction()
if(MODE STREQUAL "subdirectory")
  run(${CMAKE_COMMAND} -S ${here} -B ${WORK}/build -DCMAKE_BUILD_TYPE= -DMINIGRAD_SOURCE_DIR=${SOURCE}
      -DCMAKE_EXPORT_COMPILE_COMMANDS=ON)
  # embedded: only the library, compiled for any CPU
  file(READ ${WORK}/build/CMakeCache.txt cache)
  foreach(off MG_NATIVE MG_BUILD_TESTS MG_BUILD_EXAMPLES MG_BUILD_BENCH)
    if(NOT cache MATCHES "${off}:BOOL=OFF")
      message(FATAL_ERROR "embedded minigrad has ${off} on")
    endif()
  endforeach()
  if(EXISTS ${WORK}/build/minigrad/tests OR EXISTS ${WORK}/build/minigrad/examples)
    message(FATAL_ERROR "embedded minigrad configured its tests or examples")
  endif()
  # The user's main.cpp compiled as the build would compile it (the embedded targets' include
  # folders, C++ standard and definitions; its own warnings as errors), then stop: the library's
  # sources are the ones the main build compiles with the same flags, and the installed mode
  # below links and runs the program (building the library again here took a minute and a half).
  file(READ ${WORK}/build/compile_commands.json commands)
  string(JSON n LENGTH "${commands}")
  math(EXPR last "${n} - 1")
  set(main_command "")
  foreach(i RANGE ${last})
    string(JSON file GET "${commands}" ${i} file)
    if(file MATCHES "/consumer/main\\.cpp$")
      string(JSON main_command GET "${commands}" ${i} command)
      string(JSON main_dir GET "${commands}" ${i} directory)
    endif()
  endforeach()
  if(main_command STREQUAL "")
    message(FATAL_ERROR "no compile command for the consumer's main.cpp in ${WORK}/build/compile_commands.json")
  endif()
  separate_arguments(main_args UNIX_COMMAND "${main_command}")
  execute_process(COMMAND ${main_args} WORKING_DIRECTORY ${main_dir} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "the consumer's main.cpp does not compile against the embedded minigrad (${rc})")
  endif()
  return()
elseif(MODE STREQUAL "installed")
  run(${CMAKE_COMMAND} --install ${BUILD} --prefix ${WORK}/prefix)
  # the installed header tree: include/minigrad/minigrad.h and include/minigrad/<layer>/..., every
  # header of the layers at the source's root and nothing else
  file(GLOB_RECURSE installed RELATIVE ${WORK}/prefix/include/minigrad ${WORK}/prefix/include/*)
  file(GLOB_RECURSE expected RELATIVE ${SOURCE} ${SOURCE}/tensor/*.h ${SOURCE}/autograd/*.h ${SOURCE}/nn/*.h ${SOURCE}/models/*.h ${SOURCE}/inspect/*.h
       ${SOURCE}/optim/*.h ${SOURCE}/data/*.h ${SOURCE}/viz/*.h ${SOURCE}/distributed/*.h)
  list(APPEND expected minigrad.h)
  list(REMOVE_ITEM expected tensor/onednn.h)  # private to tensor/'s sources
  list(SORT installed)
  list(SORT expected)
  if(NOT "${installed}" STREQUAL "${expected}" OR NOT "nn/module.h" IN_LIST installed)
    message(FATAL_ERROR "the headers installed under include/minigrad/ are not the layers' headers:\n"
                        "installed: ${installed}\nexpected: ${expected}")
  endif()
  run(${CMAKE_COMMAND} -S ${here} -B ${WORK}/build -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=${WORK}/prefix)
else()
  message(FATAL_ERROR "MODE must be subdirectory or installed, got '${MODE}'")
endif()
run(${CMAKE_COMMAND} --build ${WORK}/build -j2)
run(${WORK}/build/consumer)

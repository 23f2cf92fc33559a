# The test suite: every tests/**/test_*.c is one program and one ctest,
# declared here once with its folder and what it is. A test file missing from
# this list, or a name here without its file in the folder given, stops the
# configure.
#
# Folders (docs/architecture.md, "Tests"): a test of one layer's code lives
# in the tests/ folder that mirrors the layer's own (tests/net/,
# tests/engine/core/, ...), a test labelled e2e in tests/e2e/, and what the
# tests share in tests/support/. DIR names the folder under tests/.
#
# Labels:
#   threads  its code runs threads that share memory (Hogwild! trainers,
#            parameter-server shards and clients, rings, or `asgd` processes
#            that run them): CI also runs it under TSan (ctest -L threads).
#   e2e      starts real `asgd` servers and workers (processes on 127.0.0.1,
#            or in network namespaces the test makes); its folder is e2e.
# COST: seconds the test took alone on the 2-vCPU machine, so that a parallel
# ctest with no timing history yet starts the longest first.
# PARTS: the program runs as one ctest per part, `test_x PART` (named
# test_x-PART), which a parallel ctest can run side by side; the program with
# no argument runs every part. For a test too long to be the suite's tail
# alone (a slower machine, or TSan, took it near the 300 s timeout).
#
# Exit code 77 is a skip (test_skip() in tests/support/test_support.h).

set(ASGD_TEST_SOURCES "")
function(asgd_test name)
  cmake_parse_arguments(T "" "DIR;COST" "LABELS;PARTS" ${ARGN})
  if(NOT T_DIR)
    message(FATAL_ERROR "tests/tests.cmake declares ${name} without DIR, the folder under tests/ that holds ${name}.c")
  endif()
  set(src ${CMAKE_SOURCE_DIR}/tests/${T_DIR}/${name}.c)
  if(NOT EXISTS ${src})
    message(FATAL_ERROR "tests/tests.cmake declares ${name}, but tests/${T_DIR}/${name}.c does not exist")
  endif()
  if(("e2e" IN_LIST T_LABELS AND NOT T_DIR STREQUAL "e2e") OR (T_DIR STREQUAL "e2e" AND NOT "e2e" IN_LIST T_LABELS))
    message(FATAL_ERROR "tests/tests.cmake declares ${name} in tests/${T_DIR}/: a test is labelled e2e exactly when it is in tests/e2e/")
  endif()
  add_executable(${name} ${src})
  target_link_libraries(${name} PRIVATE asgd_internal)
  target_compile_options(${name} PRIVATE -UNDEBUG)
  target_compile_definitions(${name} PRIVATE
    ASGD_TEST_DATA_DIR="${CMAKE_SOURCE_DIR}/tests/data"
    ASGD_BINARY="$<TARGET_FILE:asgd>" ASGD_HOOKS_BINARY="$<TARGET_FILE:asgd-test-hooks>"
    ASGD_MAN_DIR="${ASGD_MAN_DIR}" ASGD_COMPLETION="${CMAKE_BINARY_DIR}/completion/asgd")
  add_dependencies(${name} asgd asgd-test-hooks)
  set(runs "")
  if(T_PARTS)
    foreach(part ${T_PARTS})
      add_test(NAME ${name}-${part} COMMAND ${name} ${part})
      list(APPEND runs ${name}-${part})
    endforeach()
  else()
    add_test(NAME ${name} COMMAND ${name})
    set(runs ${name})
  endif()
  foreach(run ${runs})
    set_tests_properties(${run} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)
    if(T_LABELS)
      set_tests_properties(${run} PROPERTIES LABELS "${T_LABELS}")
    endif()
    if(T_COST)
      set_tests_properties(${run} PROPERTIES COST ${T_COST})
    endif()
  endforeach()
  set(ASGD_TEST_SOURCES ${ASGD_TEST_SOURCES} ${src} PARENT_SCOPE)
  set(ASGD_ALL_TESTS ${ASGD_ALL_TESTS} ${name} PARENT_SCOPE)
  if("threads" IN_LIST T_LABELS)
    set(ASGD_THREADS_TESTS ${ASGD_THREADS_TESTS} ${name} PARENT_SCOPE)
  endif()
endfunction()

# ---- tests/kernels/ ----
asgd_test(test_blas_runtime          DIR kernels)
asgd_test(test_cuda_info             DIR kernels)
asgd_test(test_cuda_kernels          DIR kernels)
asgd_test(test_dense_small           DIR kernels)
asgd_test(test_finite                DIR kernels)
if(ASGD_HAVE_CUDA)
  target_link_libraries(test_cuda_kernels PRIVATE asgd_cuda_static)  # calls the kernels themselves
endif()

# ---- tests/datasets/ ----
asgd_test(test_compressed_input      DIR datasets)
asgd_test(test_feature_compact       DIR datasets)
asgd_test(test_gz_input              DIR datasets)
asgd_test(test_idx                   DIR datasets)
asgd_test(test_libsvm                DIR datasets)
asgd_test(test_parse_blocks          DIR datasets       LABELS threads       COST 4)
asgd_test(test_ratings_io            DIR datasets)

# ---- tests/staleness/ ----
asgd_test(test_staleness             DIR staleness)
asgd_test(test_delay_trace           DIR staleness)

# ---- tests/net/ ----
asgd_test(test_buffer_pool           DIR net            LABELS threads)
asgd_test(test_compress              DIR net)
asgd_test(test_launch_env            DIR net)
# Not under TSan: it checks that a shard hands memory back to the system,
# which a sanitizer's allocator does not (ASan's quarantine, TSan's heap).
asgd_test(test_memory_guard          DIR net)
asgd_test(test_rendezvous            DIR net                                 COST 4)
asgd_test(test_shm_allreduce         DIR net            LABELS threads       COST 3)
asgd_test(test_stream_ring           DIR net                                 COST 2)
asgd_test(test_wire                  DIR net)
asgd_test(test_allreduce             DIR net            LABELS threads       COST 2)
asgd_test(test_ps_parts              DIR net            LABELS threads)
asgd_test(test_ps_reply              DIR net            LABELS threads)
asgd_test(test_ps_progress           DIR net            LABELS threads)
asgd_test(test_shm_frames            DIR net            LABELS threads)
asgd_test(test_ps_local_round        DIR net            LABELS threads)
asgd_test(test_ps_server             DIR net            LABELS threads       COST 2)
asgd_test(test_ps_server_faults      DIR net            LABELS threads       COST 6)
asgd_test(test_hier_allreduce        DIR net            LABELS threads)

# ---- tests/engine/core/ ----
asgd_test(test_checkpoint            DIR engine/core                         COST 10)
asgd_test(test_clip_trainer          DIR engine/core    LABELS threads)
# The learning tests' threads run the same Hogwild!, locked and sync steps as
# test_trainer (MLP, logreg, mf; 2-3 threads) and test_lost_updates (the
# 784-256-128-10 MLP, logreg), which TSan runs; under TSan they took 50 s and
# 174 s of its 8.5 minutes for no code those two leave out.
asgd_test(test_learning              DIR engine/core)
asgd_test(test_learning_mlp          DIR engine/core                         COST 6)
asgd_test(test_lost_updates          DIR engine/core    LABELS threads       COST 3)
asgd_test(test_hogwild_replicas      DIR engine/core    LABELS threads)
asgd_test(test_asan_extent           DIR engine/core)
asgd_test(test_params                DIR engine/core    LABELS threads)
asgd_test(test_trainer               DIR engine/core    LABELS threads       COST 4)
asgd_test(test_train_order           DIR engine/core    LABELS threads)
asgd_test(test_config_file           DIR engine/core                         COST 2)
asgd_test(test_cpu_pin               DIR engine/core    LABELS threads)

# ---- tests/engine/data/ ----
asgd_test(test_generate              DIR engine/data                         COST 14)
asgd_test(test_split                 DIR engine/data)
asgd_test(test_test_data             DIR engine/data                         COST 4)

# ---- tests/engine/models/ ----
asgd_test(test_eval_blocks           DIR engine/models)
asgd_test(test_gradcheck             DIR engine/models)
asgd_test(test_model_registry        DIR engine/models)
asgd_test(test_multiclass            DIR engine/models                       COST 2)

# ---- tests/engine/gpu/ ----
asgd_test(test_gpu_train             DIR engine/gpu)

# ---- tests/engine/sim/ ----
asgd_test(test_simulate              DIR engine/sim                          COST 5)

# ---- tests/engine/replica/ ----
asgd_test(test_working_set           DIR engine/replica)

# ---- tests/engine/run/ ----
asgd_test(test_model_file            DIR engine/run                          COST 9)
asgd_test(test_run_record            DIR engine/run)

# ---- tests/engine/cli/ ----
asgd_test(test_cli                   DIR engine/cli     LABELS threads       COST 3)
asgd_test(test_cli_manual            DIR engine/cli)
add_dependencies(test_cli_manual asgd_manual)  # reads the built pages and completion

# ---- tests/engine/api/ ----
asgd_test(test_api                   DIR engine/api)
asgd_test(test_api_model             DIR engine/api     LABELS threads)
asgd_test(test_install               DIR engine/api                          COST 2)
add_dependencies(test_install asgd_shared asgd_static asgd_manual)  # what `cmake --install` copies
if(TARGET asgd_cuda)
  add_dependencies(test_install asgd_cuda)
endif()
string(REPLACE ";" " " _asgd_san_extra "${ASGD_SAN_FLAGS}")
target_compile_definitions(test_install PRIVATE ASGD_CMAKE_COMMAND="${CMAKE_COMMAND}"
  ASGD_BUILD_DIR="${CMAKE_BINARY_DIR}" ASGD_SOURCE_DIR="${CMAKE_SOURCE_DIR}"
  ASGD_C_COMPILER="${CMAKE_C_COMPILER}" ASGD_EXTRA_FLAGS="${_asgd_san_extra}")

# ---- tests/support/ ----
asgd_test(test_remove_tree           DIR support)

# ---- tests/fuzz/ ----
asgd_test(test_fuzz_regressions      DIR fuzz)
target_sources(test_fuzz_regressions PRIVATE ${ASGD_FUZZ_SOURCES})  # replays tests/fuzz/<harness>/
target_compile_definitions(test_fuzz_regressions PRIVATE ASGD_FUZZ_DIR="${CMAKE_SOURCE_DIR}/tests/fuzz")

# ---- tests/e2e/ ----
asgd_test(test_backup_workers        DIR e2e            LABELS threads e2e   COST 4)
asgd_test(test_cluster_launch        DIR e2e            LABELS e2e           COST 2)
asgd_test(test_collective            DIR e2e            LABELS e2e           COST 13)
asgd_test(test_collective_mpi        DIR e2e            LABELS e2e           COST 3)
if(ASGD_HAVE_MPI)
  target_compile_definitions(test_collective_mpi PRIVATE ASGD_MPIEXEC="${MPIEXEC_EXECUTABLE}")
endif()
asgd_test(test_compress_launch       DIR e2e            LABELS e2e           COST 5)
asgd_test(test_csv                   DIR e2e            LABELS threads e2e   COST 3)
asgd_test(test_curve_cli             DIR e2e            LABELS threads e2e   COST 6)
asgd_test(test_downpour              DIR e2e            LABELS threads e2e   COST 19 PARTS equivalences async)
asgd_test(test_elastic               DIR e2e            LABELS threads e2e   COST 31)
asgd_test(test_exactly_once          DIR e2e            LABELS threads e2e   COST 3)
asgd_test(test_faults                DIR e2e            LABELS threads e2e   COST 28 PARTS evictions restarts)
asgd_test(test_global_eval           DIR e2e            LABELS threads e2e   COST 5)
asgd_test(test_gpu_downpour          DIR e2e            LABELS threads e2e)
asgd_test(test_hostile               DIR e2e            LABELS e2e           COST 12)
asgd_test(test_hybrid                DIR e2e            LABELS threads e2e   COST 3)
asgd_test(test_launch_curve          DIR e2e            LABELS e2e           COST 4)
asgd_test(test_launch_stop           DIR e2e            LABELS threads e2e   COST 20)
asgd_test(test_launcher_conventions  DIR e2e            LABELS e2e           COST 2)
asgd_test(test_local_sgd             DIR e2e            LABELS threads e2e   COST 6)
asgd_test(test_main_job              DIR e2e            LABELS e2e           COST 5)
target_compile_definitions(test_main_job PRIVATE ASGD_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
asgd_test(test_messages              DIR e2e            LABELS e2e           COST 11)
asgd_test(test_netns                 DIR e2e            LABELS e2e           COST 22)
asgd_test(test_ps_transport          DIR e2e            LABELS e2e           COST 2)
asgd_test(test_rank_env_launchers    DIR e2e            LABELS e2e)
asgd_test(test_restart_servers       DIR e2e            LABELS e2e           COST 21)
asgd_test(test_scaling               DIR e2e            LABELS threads e2e   COST 2)
asgd_test(test_security              DIR e2e            LABELS threads e2e   COST 4)
asgd_test(test_server_replicas       DIR e2e            LABELS threads e2e   COST 30 PARTS one-kill more-kills)
asgd_test(test_signals               DIR e2e            LABELS threads e2e   COST 2)
asgd_test(test_ssp_bound             DIR e2e            LABELS threads e2e   COST 15)
asgd_test(test_ssp_end               DIR e2e            LABELS threads e2e   COST 4)
asgd_test(test_stdin_input           DIR e2e            LABELS threads e2e   COST 3)
asgd_test(test_trace                 DIR e2e            LABELS threads e2e   COST 1)
asgd_test(test_worker_checkpoint     DIR e2e            LABELS threads e2e   COST 6)
asgd_test(test_worker_memory         DIR e2e            LABELS e2e           COST 8)

# What the sanitizer builds of .ci/run build, instead of every target: the
# programs of every test (ASan), of the tests labelled threads (TSan).
add_custom_target(all_tests DEPENDS ${ASGD_ALL_TESTS})
add_custom_target(threads_tests DEPENDS ${ASGD_THREADS_TESTS})

# Every test file is declared above, in its own folder.
file(GLOB_RECURSE _asgd_test_files CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tests/test_*.c)
foreach(f ${_asgd_test_files})
  if(NOT f IN_LIST ASGD_TEST_SOURCES)
    get_filename_component(n ${f} NAME_WE)
    file(RELATIVE_PATH rel ${CMAKE_SOURCE_DIR} ${f})
    get_filename_component(d ${rel} DIRECTORY)
    string(REGEX REPLACE "^tests/" "" d ${d})
    message(FATAL_ERROR "${rel} is not declared in tests/tests.cmake: add asgd_test(${n} DIR ${d} ...) with its labels")
  endif()
endforeach()

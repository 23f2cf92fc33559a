# The test suite: every tests/test_*.c is one program and one ctest, declared
# here once with what it is. A test file missing from this list, or a name
# here without its file, stops the configure.
#
# Labels:
#   threads  its code runs threads that share memory (Hogwild! trainers,
#            parameter-server shards and clients, rings, or `asgd` processes
#            that run them): CI also runs it under TSan (ctest -L threads).
#   e2e      starts real `asgd` servers and workers (processes on 127.0.0.1,
#            or in network namespaces the test makes).
# COST: seconds the test took alone on the 2-vCPU machine, so that a parallel
# ctest with no timing history yet starts the longest first.
#
# Exit code 77 is a skip (test_skip() in tests/test_support.h).

set(ASGD_TEST_NAMES "")
function(asgd_test name)
  cmake_parse_arguments(T "" "COST" "LABELS" ${ARGN})
  set(src ${CMAKE_SOURCE_DIR}/tests/${name}.c)
  if(NOT EXISTS ${src})
    message(FATAL_ERROR "tests/tests.cmake declares ${name}, but tests/${name}.c does not exist")
  endif()
  add_executable(${name} ${src})
  target_link_libraries(${name} PRIVATE asgd_internal)
  target_compile_options(${name} PRIVATE -UNDEBUG)
  target_compile_definitions(${name} PRIVATE
    ASGD_TEST_DATA_DIR="${CMAKE_SOURCE_DIR}/tests/data"
    ASGD_BINARY="$<TARGET_FILE:asgd>" ASGD_HOOKS_BINARY="$<TARGET_FILE:asgd-test-hooks>"
    ASGD_MAN_DIR="${ASGD_MAN_DIR}" ASGD_COMPLETION="${CMAKE_BINARY_DIR}/completion/asgd")
  add_dependencies(${name} asgd asgd-test-hooks)
  add_test(NAME ${name} COMMAND ${name})
  set_tests_properties(${name} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)
  if(T_LABELS)
    set_tests_properties(${name} PROPERTIES LABELS "${T_LABELS}")
  endif()
  if(T_COST)
    set_tests_properties(${name} PROPERTIES COST ${T_COST})
  endif()
  set(ASGD_TEST_NAMES ${ASGD_TEST_NAMES} ${name} PARENT_SCOPE)
endfunction()

# ---- layers below the engine: formats, math, the network ----
asgd_test(test_blas_runtime)
asgd_test(test_buffer_pool           LABELS threads)
asgd_test(test_compress)
asgd_test(test_compressed_input)
asgd_test(test_gz_input)
asgd_test(test_idx)
asgd_test(test_launch_env)
asgd_test(test_libsvm)
asgd_test(test_parse_blocks          LABELS threads      COST 4)
# Not under TSan: it checks that a shard hands memory back to the system,
# which a sanitizer's allocator does not (ASan's quarantine, TSan's heap).
asgd_test(test_memory_guard)
asgd_test(test_ratings_io)
asgd_test(test_rendezvous                                COST 4)
asgd_test(test_shm_allreduce         LABELS threads      COST 3)
asgd_test(test_staleness)
asgd_test(test_stream_ring                               COST 2)
asgd_test(test_wire)
asgd_test(test_allreduce             LABELS threads      COST 2)
asgd_test(test_ps_parts              LABELS threads)
asgd_test(test_ps_reply              LABELS threads)
asgd_test(test_ps_server             LABELS threads      COST 2)
asgd_test(test_ps_server_faults      LABELS threads      COST 6)
asgd_test(test_hier_allreduce        LABELS threads)
asgd_test(test_cuda_info)
asgd_test(test_cuda_kernels)
if(ASGD_HAVE_CUDA)
  target_link_libraries(test_cuda_kernels PRIVATE asgd_cuda_static)  # calls the kernels themselves
endif()

# ---- the engine in one process ----
asgd_test(test_api)
asgd_test(test_api_model             LABELS threads)
asgd_test(test_checkpoint                                COST 10)
asgd_test(test_clip_trainer          LABELS threads)
asgd_test(test_delay_trace)
asgd_test(test_generate)
asgd_test(test_gradcheck)
asgd_test(test_gpu_train)
# The learning tests' threads run the same Hogwild!, locked and sync steps as
# test_trainer (MLP, logreg, mf; 2-3 threads) and test_lost_updates (the
# 784-256-128-10 MLP, logreg), which TSan runs; under TSan they took 50 s and
# 174 s of its 8.5 minutes for no code those two leave out.
asgd_test(test_learning)
asgd_test(test_learning_mlp                              COST 6)
asgd_test(test_lost_updates          LABELS threads      COST 3)
asgd_test(test_hogwild_replicas       LABELS threads)
asgd_test(test_model_registry)
asgd_test(test_multiclass                                COST 2)
asgd_test(test_csv                   LABELS threads e2e  COST 3)
asgd_test(test_stdin_input           LABELS threads e2e  COST 3)
asgd_test(test_params                LABELS threads)
asgd_test(test_simulate                                  COST 5)
asgd_test(test_split)
asgd_test(test_trainer               LABELS threads      COST 4)
asgd_test(test_train_order           LABELS threads)
asgd_test(test_fuzz_regressions)
target_sources(test_fuzz_regressions PRIVATE ${ASGD_FUZZ_SOURCES})  # replays tests/fuzz/<harness>/
target_compile_definitions(test_fuzz_regressions PRIVATE ASGD_FUZZ_DIR="${CMAKE_SOURCE_DIR}/tests/fuzz")

# ---- the command line ----
asgd_test(test_cli                   LABELS threads      COST 3)
asgd_test(test_cli_manual)
add_dependencies(test_cli_manual asgd_manual)  # reads the built pages and completion
asgd_test(test_config_file                               COST 2)
asgd_test(test_install                                   COST 2)
string(REPLACE ";" " " _asgd_san_extra "${ASGD_SAN_FLAGS}")
target_compile_definitions(test_install PRIVATE ASGD_CMAKE_COMMAND="${CMAKE_COMMAND}"
  ASGD_BUILD_DIR="${CMAKE_BINARY_DIR}" ASGD_SOURCE_DIR="${CMAKE_SOURCE_DIR}"
  ASGD_C_COMPILER="${CMAKE_C_COMPILER}" ASGD_EXTRA_FLAGS="${_asgd_san_extra}")
asgd_test(test_messages              LABELS e2e          COST 11)
asgd_test(test_model_file                                COST 9)
asgd_test(test_remove_tree)
asgd_test(test_run_record)
asgd_test(test_test_data                                 COST 4)

# ---- distributed runs end to end ----
asgd_test(test_backup_workers        LABELS threads e2e  COST 4)
asgd_test(test_cluster_launch        LABELS e2e          COST 2)
asgd_test(test_collective            LABELS e2e          COST 13)
asgd_test(test_collective_mpi        LABELS e2e          COST 3)
if(ASGD_HAVE_MPI)
  target_compile_definitions(test_collective_mpi PRIVATE ASGD_MPIEXEC="${MPIEXEC_EXECUTABLE}")
endif()
asgd_test(test_compress_launch       LABELS e2e          COST 5)
asgd_test(test_curve_cli             LABELS threads e2e  COST 6)
asgd_test(test_downpour              LABELS threads e2e  COST 19)
asgd_test(test_elastic               LABELS threads e2e  COST 31)
asgd_test(test_exactly_once          LABELS threads e2e  COST 3)
asgd_test(test_faults                LABELS threads e2e  COST 28)
asgd_test(test_global_eval           LABELS threads e2e  COST 5)
asgd_test(test_gpu_downpour          LABELS threads e2e)
asgd_test(test_hostile               LABELS e2e          COST 12)
asgd_test(test_hybrid                LABELS threads e2e  COST 3)
asgd_test(test_launch_curve          LABELS e2e          COST 4)
asgd_test(test_launch_stop           LABELS threads e2e  COST 20)
asgd_test(test_launcher_conventions  LABELS e2e          COST 2)
asgd_test(test_local_sgd             LABELS threads e2e  COST 6)
asgd_test(test_main_job              LABELS e2e          COST 5)
target_compile_definitions(test_main_job PRIVATE ASGD_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
asgd_test(test_netns                 LABELS e2e          COST 22)
asgd_test(test_rank_env_launchers    LABELS e2e)
asgd_test(test_restart_servers       LABELS e2e          COST 21)
asgd_test(test_scaling               LABELS threads e2e  COST 2)
asgd_test(test_security              LABELS threads e2e  COST 4)
asgd_test(test_server_replicas       LABELS threads e2e  COST 80)
asgd_test(test_signals               LABELS threads e2e  COST 2)
asgd_test(test_ssp_bound             LABELS threads e2e  COST 15)
asgd_test(test_trace                 LABELS threads e2e  COST 1)
asgd_test(test_worker_checkpoint     LABELS threads e2e  COST 6)

# Every test file is declared above.
file(GLOB _asgd_test_files CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tests/test_*.c)
foreach(f ${_asgd_test_files})
  get_filename_component(n ${f} NAME_WE)
  if(NOT n IN_LIST ASGD_TEST_NAMES)
    message(FATAL_ERROR "tests/${n}.c is not declared in tests/tests.cmake: add asgd_test(${n} ...) with its labels")
  endif()
endforeach()

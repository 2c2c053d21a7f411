# Fails when a committed reference page differs from the one the build
# generated from ODS (the C API reference from fsdprt.h, the pipelines from
# fsdp-opt). Run with
# -DGENERATED=<dir> -DCOMMITTED=<dir>.
set(stale "")
foreach(page FSDPDialect.md ONNXDialect.md FSDPPasses.md FSDPInterfaces.md
             FSDPPipelines.md
             fsdprt-api.md)
  execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files --ignore-eol
                          ${GENERATED}/${page} ${COMMITTED}/${page}
                  RESULT_VARIABLE differs)
  if(differs)
    list(APPEND stale ${page})
  endif()
endforeach()
# The operator table, generated from fsdp-opt, lives beside the guides.
execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files --ignore-eol
                        ${GENERATED}/../ops.md ${COMMITTED}/../ops.md
                RESULT_VARIABLE differs)
if(differs)
  list(APPEND stale ../ops.md)
endif()
if(stale)
  message(FATAL_ERROR "docs/reference is out of date (${stale}); regenerate "
          "it with: cmake --build build --target update-docs")
endif()
message(STATUS "docs/reference and docs/ops.md match the ODS definitions, "
               "fsdprt.h, fsdp-opt and ONNXOpTable.def")

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
if(stale)
  message(FATAL_ERROR "docs/reference is out of date (${stale}); regenerate "
          "it with: cmake --build build --target update-docs")
endif()
message(STATUS "docs/reference matches the ODS definitions and fsdprt.h")

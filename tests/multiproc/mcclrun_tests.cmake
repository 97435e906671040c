# tools/mcclrun against tiny sh/Python ranks: the launcher contract is tested
# even when no mccl binary builds.  The system interpreter is used on purpose:
# it is what dev.sh installs and what mcclrun has to run on.
add_test(NAME mcclrun_launcher
         COMMAND ${MCCL_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/mcclrun_test.py)
set_tests_properties(mcclrun_launcher PROPERTIES
  TIMEOUT 120
  LABELS multiproc
  ENVIRONMENT MCCLRUN=${PROJECT_SOURCE_DIR}/tools/mcclrun)

# find_package(klaunch CONFIG PATHS <klaunch>/cmake): klaunch_add_family and
# klaunch::runtime, as cmake/klaunch.cmake says.
include("${CMAKE_CURRENT_LIST_DIR}/klaunch.cmake")
set(klaunch_FOUND TRUE)

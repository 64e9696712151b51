# The `guest_assets` library: every guest/*.py compiled in as bytes (actors/guest_assets.hpp),
# so a guestflow binary never reads the source tree at run time. The source is regenerated
# when a file changes, and the glob is re-checked at build time (CONFIGURE_DEPENDS) so an
# added or removed file regenerates it too (the list is a dependency through a stamp file).
file(GLOB guest_asset_files CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/guest/*.py)
list(SORT guest_asset_files)
set(guest_assets_dir ${PROJECT_BINARY_DIR}/generated)
set(guest_assets_list ${guest_assets_dir}/guest_assets.list)
set(guest_assets_cpp ${guest_assets_dir}/guest_assets.cpp)
string(REPLACE ";" "\n" guest_assets_lines "${guest_asset_files}")
file(CONFIGURE OUTPUT ${guest_assets_list} CONTENT "${guest_assets_lines}\n")
add_custom_command(
  OUTPUT ${guest_assets_cpp}
  COMMAND ${CMAKE_COMMAND} -DLIST=${guest_assets_list} -DOUTPUT=${guest_assets_cpp}
          -P ${PROJECT_SOURCE_DIR}/cmake/embed_guest_assets.cmake
  DEPENDS ${guest_asset_files} ${guest_assets_list}
          ${PROJECT_SOURCE_DIR}/cmake/embed_guest_assets.cmake
  COMMENT "Embedding guest/*.py"
  VERBATIM)
add_library(guest_assets STATIC ${guest_assets_cpp})
target_include_directories(guest_assets PUBLIC ${PROJECT_SOURCE_DIR})

# Copies the trellis-serve page and its vendored ES modules into WEB_ROOT.
# Run by the trellis-serve-web target: cmake -DPAGE_DIR=... -DNODE_MODULES=...
# -DWEB_ROOT=... -P CopyWebFiles.cmake. file(COPY) skips files whose copy has
# the same timestamp, so an unchanged tree costs only the checks.
foreach(var PAGE_DIR NODE_MODULES WEB_ROOT)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "CopyWebFiles.cmake: ${var} is not set")
  endif()
endforeach()

set(page_files index.html app.js style.css)

# vendor/<name>/ <- node_modules/<package>/: only the bundles the import map
# in index.html names (and what they import), plus each package's license.
set(vendor_names three model-viewer gaussian-splats-3d)
set(vendor_three_package three)
set(vendor_three_files build/three.module.min.js build/three.core.min.js LICENSE)
set(vendor_model-viewer_package @google/model-viewer)
set(vendor_model-viewer_files dist/model-viewer-module.min.js LICENSE)
set(vendor_gaussian-splats-3d_package @mkkellogg/gaussian-splats-3d)
set(vendor_gaussian-splats-3d_files build/gaussian-splats-3d.module.js LICENSE)

set(missing "")
foreach(name ${vendor_names})
  foreach(f ${vendor_${name}_files})
    set(src "${NODE_MODULES}/${vendor_${name}_package}/${f}")
    if(NOT EXISTS "${src}")
      list(APPEND missing "${src}")
    endif()
  endforeach()
endforeach()
if(missing)
  # Not a build error: the rest of the product builds without npm, and
  # trellis-serve answers GET / with a JSON error naming the missing page
  # (CI's browser test fails on it).
  list(JOIN missing "\n  " missing_lines)
  message(WARNING
    "trellis-serve-web: the page's npm packages are not installed, so the "
    "page is not built; run scripts/install-deps.sh (it installs them into "
    "build-deps/web with npm). Missing:\n  ${missing_lines}")
  return()
endif()

foreach(f ${page_files})
  file(COPY "${PAGE_DIR}/${f}" DESTINATION "${WEB_ROOT}")
endforeach()
foreach(name ${vendor_names})
  foreach(f ${vendor_${name}_files})
    file(COPY "${NODE_MODULES}/${vendor_${name}_package}/${f}"
         DESTINATION "${WEB_ROOT}/vendor/${name}")
  endforeach()
endforeach()

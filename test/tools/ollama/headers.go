//go:build tools

// Package tools pins the Go module whose miniaudio.h Ollama's build needs.
//
// Ollama's module zip leaves out llama.cpp's vendor/ directory (the go
// command drops vendor/ directories from module zips), so three headers
// must come from elsewhere: nlohmann/json.hpp and stb/stb_image.h from
// Debian (nlohmann-json3-dev, libstb-dev), and miniaudio/miniaudio.h,
// which Debian lacks, from github.com/gen2brain/malgo, whose module root
// holds miniaudio.h. Requiring it here keeps its version and checksum in
// go.mod and go.sum. The build tag keeps the package (and malgo's cgo) out
// of every build: .ci/ollama only reads malgo's directory from the module
// cache.
package tools

import _ "github.com/gen2brain/malgo"

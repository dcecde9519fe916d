// Precompiled header for the torch-facing layers: ATen is most of their build time.
#pragma once

#include <ATen/ATen.h>
#include <torch/library.h>

// RUN: pyocc-opt %s -p "dnn-npu-schedule{sram=8KiB}" | filecheck %s --check-prefix=SMALL
// RUN: pyocc-opt %s -p "dnn-npu-schedule{sram=64KiB}" | filecheck %s --check-prefix=LARGE

// A conv that stores its channels shuffled (dnn-fuse folded a channel
// shuffle into it) cannot be split by output channels: they are not stored
// together. Row bands alone need its 8 KiB of weights whole, which 8 KiB of
// SRAM cannot hold beside a band: the schedule gives the shuffle back as
// view, transpose, view, and streams the plain conv's weights a block of
// output channels at a time; the transpose copies row bands.
// SMALL-LABEL: func.func @shuffled
// SMALL-NOT:   shuffle =
// SMALL:       dnn.conv
// SMALL:       dnn.transpose {{.*}}perm = array<i64: 0, 2, 1, 3, 4>
// In 64 KiB it fits whole and runs as the one shuffled conv.
// LARGE-LABEL: func.func @shuffled
// LARGE:       dnn.conv {{.*}}shuffle = 2 : i64
// LARGE-NOT:   dnn.transpose
func.func @shuffled(%x: tensor<1x64x4x4xf32>) -> tensor<1x64x4x4xf32> {
  %w = "dnn.weight"() <{splat = dense<0.5> : tensor<1xf32>}> : () -> tensor<64x32x1x1xf32>
  %y = dnn.conv ins(%x, %w : tensor<1x64x4x4xf32>, tensor<64x32x1x1xf32>) {group = 2 : i64, shuffle = 2 : i64} : tensor<1x64x4x4xf32>
  func.return %y : tensor<1x64x4x4xf32>
}

// A small example of the trellis dialect: a transformer FFN (spec §3.6) on a
// bounded voxel dimension, with a duplicated projection that the graph phase
// removes (CSE). Compile it with:
//   trellisc docs/examples/mlp.mlir --compile-to=graph
func.func @ffn(%x: tensor<?x768xf16, #trellis.bounds<[32768]>>) -> tensor<?x768xf16, #trellis.bounds<[32768]>> {
  %w0 = trellis.weight "blocks.0.mlp.mlp.0.weight" of "slat_decoder_gs" : tensor<3072x768xf16>
  %b0 = trellis.weight "blocks.0.mlp.mlp.0.bias" of "slat_decoder_gs" : tensor<3072xf16>
  %w2 = trellis.weight "blocks.0.mlp.mlp.2.weight" of "slat_decoder_gs" : tensor<768x3072xf16>
  %b2 = trellis.weight "blocks.0.mlp.mlp.2.bias" of "slat_decoder_gs" : tensor<768xf16>
  %h = trellis.linear %x, %w0, %b0 : (tensor<?x768xf16, #trellis.bounds<[32768]>>, tensor<3072x768xf16>, tensor<3072xf16>) -> tensor<?x3072xf16, #trellis.bounds<[32768]>>
  %h_again = trellis.linear %x, %w0, %b0 : (tensor<?x768xf16, #trellis.bounds<[32768]>>, tensor<3072x768xf16>, tensor<3072xf16>) -> tensor<?x3072xf16, #trellis.bounds<[32768]>>
  %a = trellis.silu %h : tensor<?x3072xf16, #trellis.bounds<[32768]>>
  %y = trellis.linear %a, %w2, %b2 : (tensor<?x3072xf16, #trellis.bounds<[32768]>>, tensor<768x3072xf16>, tensor<768xf16>) -> tensor<?x768xf16, #trellis.bounds<[32768]>>
  %r = trellis.add %x, %y : (tensor<?x768xf16, #trellis.bounds<[32768]>>, tensor<?x768xf16, #trellis.bounds<[32768]>>) -> tensor<?x768xf16, #trellis.bounds<[32768]>>
  %unused = trellis.silu %h_again : tensor<?x3072xf16, #trellis.bounds<[32768]>>
  return %r : tensor<?x768xf16, #trellis.bounds<[32768]>>
}

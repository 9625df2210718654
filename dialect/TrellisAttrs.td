//===- TrellisAttrs.td - Attributes of the trellis dialect -*- tablegen -*-===//
#ifndef TRELLIS_ATTRS_TD
#define TRELLIS_ATTRS_TD

include "TrellisDialect.td"
include "mlir/IR/EnumAttr.td"

class Trellis_Attr<string name, string attrMnemonic, list<Trait> traits = []>
    : AttrDef<Trellis_Dialect, name, traits> {
  let mnemonic = attrMnemonic;
}

def Trellis_BoundsAttr : Trellis_Attr<"Bounds", "bounds"> {
  let summary = "Upper bounds of a tensor type's dynamic dimensions";
  let description = [{
    The encoding of a ranked tensor type with dynamic dimensions: one upper
    bound per `?`, in order. The memory planner sizes buffers from the bounds
    when a size is not yet known, and the runtime checks actual sizes against
    them.

    ```mlir
    tensor<?x1024xf16, #trellis.bounds<[32768]>>
    ```
  }];
  let parameters = (ins ArrayRefParameter<"int64_t">:$max);
  let assemblyFormat = "`<` `[` $max `]` `>`";
  let genVerifyDecl = 1;
}

def Trellis_MultiImageMode : I32EnumAttr<"MultiImageMode",
    "How a flow sampler uses several condition images (spec §2.3)", [
      I32EnumAttrCase<"none", 0>,
      I32EnumAttrCase<"stochastic", 1>,
      I32EnumAttrCase<"multidiffusion", 2>]> {
  let cppNamespace = "::mlir::trellis";
  let genSpecializedAttr = 0;
}

def Trellis_MultiImageModeAttr
    : EnumAttr<Trellis_Dialect, Trellis_MultiImageMode, "multi_image"> {
  let summary = "Multi-image conditioning mode of trellis.flow_sample";
  let description = [{
    `none`: one condition per sample. `stochastic`: Euler step k uses image
    k mod N_img. `multidiffusion`: the conditional velocity is the mean over
    all images. See `trellis.flow_sample` and spec §2.3.

    ```mlir
    #trellis.multi_image<stochastic>
    ```
  }];
  let assemblyFormat = "`<` $value `>`";
}

#endif // TRELLIS_ATTRS_TD

package doc

// MergePatch applies the JSON merge patch (RFC 7396) patch to target and
// returns the result: for every field of patch, null removes the field from
// the result, an object is merged recursively into the target's field (or
// into an empty object if the target's field is missing or not an object),
// and any other value replaces the target's field. Nulls inside a patch
// object that creates a new field are dropped, as the RFC requires.
//
// MergePatch does not modify target or patch. The result is a new map at
// every level the patch touches; sub-values it does not touch are shared with
// target, and values taken whole from patch are shared with patch, so treat
// all three as read-only afterwards.
//
// MergePatch does not check keys (use [ParsePatch] for that), treats "_id"
// and "_version" like any other field, and returns an [*Error] if the result
// nests objects and arrays deeper than [MaxDepth]. A nil target is treated as
// an empty object.
func MergePatch(target, patch map[string]any) (map[string]any, error) {
	out, err := mergeObject(target, patch, 1)
	if err != nil {
		err.msg = "applying the patch would make the document too deeply nested: " + err.msg
		return nil, err.toError()
	}
	return out, nil
}

// mergeObject merges patch into target, whose result is at depth depth.
func mergeObject(target, patch map[string]any, depth int) (map[string]any, *pathError) {
	if depth > MaxDepth {
		return nil, depthError(depth)
	}
	out := make(map[string]any, len(target)+len(patch))
	for k, v := range target {
		if _, patched := patch[k]; patched {
			continue
		}
		if err := checkDepth(v, depth+1); err != nil {
			err.rev = append(err.rev, keySegment(k))
			return nil, err
		}
		out[k] = v
	}
	for k, pv := range patch {
		switch pv := pv.(type) {
		case nil:
			continue // remove k: it is not copied to out
		case map[string]any:
			tv, _ := target[k].(map[string]any)
			v, err := mergeObject(tv, pv, depth+1)
			if err != nil {
				err.rev = append(err.rev, keySegment(k))
				return nil, err
			}
			out[k] = v
		default:
			if err := checkDepth(pv, depth+1); err != nil {
				err.rev = append(err.rev, keySegment(k))
				return nil, err
			}
			out[k] = pv
		}
	}
	return out, nil
}

// checkDepth checks that v, if a container, is at most MaxDepth deep when it
// sits at depth depth.
func checkDepth(v any, depth int) *pathError {
	switch x := v.(type) {
	case map[string]any:
		if depth > MaxDepth {
			return depthError(depth)
		}
		for k, e := range x {
			if err := checkDepth(e, depth+1); err != nil {
				err.rev = append(err.rev, keySegment(k))
				return err
			}
		}
	case []any:
		if depth > MaxDepth {
			return depthError(depth)
		}
		for i, e := range x {
			if err := checkDepth(e, depth+1); err != nil {
				err.rev = append(err.rev, indexSegment(i))
				return err
			}
		}
	}
	return nil
}

"""Dynamic Resource Allocation in the pure core: the DRA objects scheduling reads
(`model`), their CEL selectors (`selectors`), the pools of devices a node can use
(`pools`) and the allocator that picks devices for a pod's claims (`allocator`)."""

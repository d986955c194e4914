from tests.helpers import ToolCaller

async def test_probe(writer: ToolCaller) -> None:
    item = (await writer.ok("memory_store", {"action": "create", "content": "probe"})).item
    for change in ({"surface_after": "2030-01-02T03:04:05"}, {"surface_after": "2030-01-02"}, {"surface_after": 0}, {"tags": ["x"*100]}, {"tags": ["y"]*51}):
        a = await writer("memory_store", {"action": "update", "thought_id": item["id"], **change})
        print(change if len(str(change))<80 else "long", a.is_error, a.text[:250])
    a = await writer("memory_store", {"action": "create", "content": "x\x00y"})
    print("nul", a.is_error, a.text[:250])
    a = await writer("memory_store", {"action": "create", "content": "ok", "tags": ["a\x00b"]})
    print("nul tag", a.is_error, a.text[:250])
    a = await writer("memory_store", {"action": "bulk_create", "thoughts": [{"content": "a\x00"}, {"content": "fine"}]})
    print("nul bulk", a.is_error, a.text[:250])
    a = await writer("memory_recall", {"action": "list", "cwd": "/a\x00b"})
    print("nul cwd", a.is_error, a.text[:250])
    a = await writer("memory_recall", {"action": "list", "tag": "a\x00b"})
    print("nul tag list", a.is_error, a.text[:250])
    a = await writer("memory_recall", {"action": "list", "offset": 10**12})
    print("big offset", a.is_error, a.text[:250])
    a = await writer("memory_recall", {"action": "list", "offset": 10**20})
    print("huge offset", a.is_error, a.text[:250])

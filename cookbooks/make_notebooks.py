"""Writes the cookbook notebooks from the cells below, executed (outputs included).

Edit this file, not the .ipynb files, then run ``python cookbooks/make_notebooks.py``
(``--no-execute`` writes them without outputs). CI executes every notebook again with
``pytest --nbmake cookbooks`` (see the Makefile).
"""

from __future__ import annotations

from pathlib import Path

import sys

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

HERE = Path(__file__).parent

# -- cells shared by the three notebooks --------------------------------------------------------
DEMO = '''\
import json, os, shutil, tempfile, warnings
from importlib.resources import files

os.environ["TQDM_DISABLE"] = "1"                          # no progress bars in the outputs
warnings.filterwarnings("ignore", message="IProgress not found")

workdir = tempfile.mkdtemp(prefix="synapse-cookbook-")   # embedded Chroma + snapshots live here

def demo_turns(limit=None):
    """The packaged demo conversation (Sam and Riley, several sessions) as engine turns."""
    data = json.loads(files("synapse_integrations").joinpath("data/demo_conversation.json").read_text())
    turns = [{"text": t["text"], "speaker": t["speaker"], "timestamp": s["datetime"]}
             for s in data["sessions"] for t in s["turns"]]
    return turns[:limit]
'''

EXPLAIN = '''\
import matplotlib.pyplot as plt
import networkx as nx

def explain(result, top=8):
    \"\"\"Why each memory was returned. The score is a sum of terms: weight x value for similarity,
    activation, PageRank and the lexical (BM25) score, with the weights the engine used
    (SynapseConfig.score_weights(); each item carries them), plus the echo and superseded
    demotions. Also which trigger found it (BM25 / dense rank; None = reached by spreading
    activation only) and the path along which activation reached it.\"\"\"
    verdict = "REJECTED (nothing in memory)" if result.rejected else "accepted"
    print(f"query: {result.query!r}\\ngate: {verdict}, confidence {result.confidence:.3f} "
          f"(tau {result.gate_tau})")
    if result.items:
        w = result.items[0].components.weights
        print("score = " + " + ".join(f"{v:g} x {k}" for k, v in w.items()) + " + echo + superseded\\n")
    print(f"{'kind':8} {'score':>6} {'sim':>6} {'act':>6} {'pr':>6} {'lex':>6} {'demote':>6} {'bm25':>5} {'dense':>5}  text")
    for it in result.items[:top]:
        c = it.components
        assert abs(sum(c.terms().values()) - it.score) < 1e-9      # the terms add up to the score
        print(f"{it.kind:8} {it.score:6.3f} {c.similarity:6.3f} {c.activation:6.3f} {c.pagerank:6.3f} "
              f"{c.lexical:6.3f} {c.echo + c.superseded:6.3f} {str(c.bm25_rank):>5} {str(c.dense_rank):>5}  "
              f"{it.text[:60]}" + (f"   path: {' -> '.join(it.path)}" if len(it.path) > 1 else ""))

def plot_activated(engine, result, top=8):
    """The activated subgraph: the top items, the nodes on their activation paths and the
    edges among them; colour = activation, size = hybrid score, squares = concepts."""
    items = result.items[:top]
    keep = {n for it in items for n in (it.path or (it.id,))} | {it.id for it in items}
    g = engine.graph.subgraph(keep)
    act = {it.id: it.components.activation for it in result.items}
    score = {it.id: it.score for it in result.items}
    pos = nx.spring_layout(g, seed=7)
    fig, ax = plt.subplots(figsize=(8, 5))
    for kind, shape in (("episode", "o"), ("concept", "s")):
        nodes = [n for n, d in g.nodes(data=True) if d["kind"] == kind]
        nx.draw_networkx_nodes(g, pos, nodelist=nodes, node_shape=shape, ax=ax, cmap="viridis",
                               node_color=[act.get(n, 0.0) for n in nodes], vmin=0, vmax=max(act.values() or [1]),
                               node_size=[200 + 1500 * score.get(n, 0.0) for n in nodes])
    nx.draw_networkx_edges(g, pos, ax=ax, alpha=0.3, arrows=False)
    nx.draw_networkx_labels(g, pos, ax=ax, font_size=7,
                            labels={n: d["text"][:22] for n, d in g.nodes(data=True)})
    ax.set_title(f"activated memories for {result.query!r}")
    ax.axis("off")
    plt.show()
'''

CLEANUP = '''\
shutil.rmtree(workdir, ignore_errors=True)
'''


def real_model_cell(code: str) -> list:
    return [
        new_markdown_cell(
            "### Optional: a real model (not executed by default)\n\n"
            "Everything above and below runs offline with a fake model. To use a real one, set "
            "`SYNAPSE_COOKBOOK_REAL_MODEL=1` (and the provider's API key), install the provider "
            "package, and re-run: the cell below then replaces `model`/`llm`. CI never sets it."),
        new_code_cell(code),
    ]


# -- LangChain ------------------------------------------------------------------------------------
LANGCHAIN = [
    new_markdown_cell(
        "# LangChain: an agent and a chain with SYNAPSE memory\n\n"
        "This notebook runs offline, top to bottom: the real MiniLM embedder, embedded Chroma in a "
        "temporary folder, and fake chat models. It shows the current LangChain 1.x patterns:\n\n"
        "1. an agent (`create_agent`) with `SynapseMemoryMiddleware` (recall before each model call, "
        "record each finished turn) and the memory tools (search, save, update, forget);\n"
        "2. what a trace shows: every recall is a retriever run with the gate's decision;\n"
        "3. an LCEL chain fed by `SynapseRetriever`, and *nothing in memory* when the gate rejects;\n"
        "4. which memories were activated and why (every term of the score, a plot)."),
    new_code_cell(DEMO),
    new_markdown_cell("## A model\n\nThe agent needs a chat model **with tool calling** (`bind_tools`). Offline we "
                      "use a fake one that answers from a script and keeps the prompts it was given."),
    new_code_cell('''\
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage

class FakeToolModel(FakeMessagesListChatModel):
    """Fake chat model that accepts tools (answers are scripted) and keeps its prompts."""
    prompts: list = []
    def bind_tools(self, tools, **kwargs):
        return self
    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        self.prompts.append(messages)
        return super()._generate(messages, stop=stop, run_manager=run_manager, **kwargs)

model = FakeToolModel(responses=[
    AIMessage("Congratulations to Dana!"),
    AIMessage("", tool_calls=[{"name": "search_memory", "id": "c1", "args": {"query": "Dana vet school"}}]),
    AIMessage("Dana starts vet school in September."),
])'''),
    *real_model_cell('''\
if os.environ.get("SYNAPSE_COOKBOOK_REAL_MODEL"):
    from langchain_openai import ChatOpenAI      # pip install langchain-openai; needs OPENAI_API_KEY
    model = ChatOpenAI(model="gpt-4o-mini", temperature=0)'''),
    new_markdown_cell("## An agent with memory middleware and memory tools\n\n`SynapseMemoryMiddleware` puts the "
                      "memories for the latest user message into that call's system message (one leading system "
                      "message, which every provider accepts) and records each finished turn. With an "
                      "`EnginePool`, the memory of a run is chosen from `config[\"configurable\"]` (here the "
                      "`user_id`, so every thread of that user shares it)."),
    new_code_cell('''\
from langchain.agents import create_agent
from langgraph.checkpoint.memory import InMemorySaver
from synapse_integrations.langchain import EnginePool, namespace_key, SynapseMemoryMiddleware, create_synapse_tools

pool = EnginePool(os.path.join(workdir, "agents"))
pool.get(namespace_key("agent", "user_id", "sam")).add_turns(demo_turns(10))        # sam already has some history
agent = create_agent(model, tools=create_synapse_tools(pool),
                     middleware=[SynapseMemoryMiddleware(pool, k=4)],
                     system_prompt="You are a helpful assistant.", checkpointer=InMemorySaver())
agent.invoke({"messages": [{"role": "user", "content": "Dana got into vet school, she starts in September!"}]},
             {"configurable": {"thread_id": "monday", "user_id": "sam"}})
out = agent.invoke({"messages": [{"role": "user", "content": "When does Dana start vet school?"}]},
                   {"configurable": {"thread_id": "friday", "user_id": "sam"}})   # a new thread
for m in out["messages"]:
    shown = str(m.content or m.tool_calls).split("<memories>")[-1]   # a tool's memory block
    print(f"{m.type:>5}: {shown:.300}")'''),
    new_code_cell('''\
prompts = getattr(model, "prompts", None)     # only the fake model records them
print("system message of the last model call:\\n")
print(prompts[-1][0].content if prompts else "(real model: not recorded)")'''),
    new_markdown_cell("## Agents can correct memory\n\n`search_memory` lists memories with their ids; "
                      "`update_memory(id, text)` stores a corrected version (the old one is kept as history and "
                      "ranked below it); `forget_memory(ids)` erases. Both refuse ids that are not in the "
                      "caller's memory."),
    new_code_cell('''\
search, save, update, forget = create_synapse_tools(pool)
sam = {"configurable": {"user_id": "sam"}}
print(search.invoke({"query": "When does Dana start vet school?"}, sam), "\\n")
dana = next(it.id for it in pool.get(namespace_key("agent", "user_id", "sam")).retrieve("When does Dana start vet school?", k=5).items
            if "September!" in it.text)                  # the user's statement the search showed
print(update.invoke({"memory_id": dana, "text": "Dana starts vet school in October, not September."}, sam))
print(forget.invoke({"memory_ids": ["ep-not-mine"]}, sam), "\\n")
print(search.invoke({"query": "When does Dana start vet school?"}, sam))'''),
    new_markdown_cell("## What a trace shows\n\nEvery recall (middleware, tools, retriever) is a retriever run in the "
                      "run's callbacks, so LangSmith shows the query, the memories returned and, inside the run, "
                      "the gate's decision as the custom event `synapse_gate`. A small handler prints them:"),
    new_code_cell('''\
from langchain_core.callbacks import BaseCallbackHandler

class RecallPrinter(BaseCallbackHandler):
    def on_retriever_start(self, serialized, query, **kwargs):
        print(f"retriever run {kwargs.get('name')!r}: {query!r}")
    def on_custom_event(self, name, data, **kwargs):
        if name == "synapse_gate":
            print(f"  gate: {'rejected' if data['rejected'] else 'accepted'} "
                  f"(confidence {data['confidence']:.3f}, tau {data['gate_tau']})")
    def on_retriever_end(self, documents, **kwargs):
        print(f"  {len(documents)} memories:", [d.page_content[:40] for d in documents])

if hasattr(model, "responses"):     # the fake model: two more scripted answers
    model.responses, model.i = [AIMessage("I have nothing in memory about that."),
                                AIMessage("Dana studies at vet school.")], 0
agent.invoke({"messages": [{"role": "user", "content": "What is the boiling point of liquid nitrogen?"}]},
             {"configurable": {"thread_id": "friday", "user_id": "sam"}, "callbacks": [RecallPrinter()]})
_ = agent.invoke({"messages": [{"role": "user", "content": "What does Dana study?"}]},
                 {"configurable": {"thread_id": "friday", "user_id": "sam"}, "callbacks": [RecallPrinter()]})'''),
    new_markdown_cell("## An LCEL chain fed by the retriever\n\n`format_documents` turns the documents into "
                      "prompt lines, or into *Nothing relevant in memory.* when there are none: the retriever "
                      "returns no documents when the gate rejects the question."),
    new_code_cell('''\
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import RunnablePassthrough
from synapse_integrations import Synapse
from synapse_integrations.langchain import SynapseRetriever, format_documents

mem = Synapse(workdir, namespace="sam")      # one memory: the user "sam"
mem.add_turns(demo_turns(20))                # consolidation runs every 5 turns
retriever = SynapseRetriever(engine=mem, k=4)
prompt = ChatPromptTemplate.from_messages([
    ("system", "Answer from these memories of earlier conversations:\\n{memories}"),
    ("human", "{question}")])
inputs = {"memories": retriever | format_documents, "question": RunnablePassthrough()}
chain = inputs | prompt | FakeListChatModel(responses=["Sam went to Whistler, with cousin Dana."])

question = "Where did Sam go skiing, and with whom?"
print((inputs | prompt).invoke(question).to_messages()[0].content)
print("\\nanswer:", chain.invoke(question).content)
print("\\noff-topic:", (inputs | prompt).invoke("What is the boiling point of liquid nitrogen?").to_messages()[0].content)'''),
    new_markdown_cell("## Which memories were activated, and why\n\nThe documents' metadata carries the same "
                      "terms (`components`, with the `weights`); here we ask the engine directly so the rejected "
                      "case is visible too."),
    new_code_cell(EXPLAIN),
    new_code_cell('''\
result = mem.retrieve(question, k=10)
explain(result)
docs = retriever.invoke(question)
print("\\nfirst document's score terms:", docs[0].metadata["components"] if docs else None)
plot_activated(mem, result)'''),
    new_code_cell('''\
pool.close()
mem.close()
''' + CLEANUP),
]

# -- LangGraph ------------------------------------------------------------------------------------
LANGGRAPH = [
    new_markdown_cell(
        "# LangGraph: an agent with a SYNAPSE memory node and a checkpointer\n\n"
        "Offline, top to bottom: real MiniLM embedder, embedded Chroma in a temporary folder, a fake chat "
        "model, and `SqliteSaver`. The graph is `recall -> agent -> record`:\n\n"
        "- `recall` retrieves memories for the latest user message into the state (`memories`) and into "
        "the thread's leading system message (one system message, first: every provider accepts it, "
        "Anthropic included);\n"
        "- `record` stores the finished turn (user message and answer) in SYNAPSE.\n\n"
        "The checkpointer keeps the thread's conversation; SYNAPSE keeps what is worth remembering across "
        "threads. We then restart both and continue the thread, and finish with `SynapseStore`."),
    new_code_cell(DEMO),
    new_code_cell('''\
from langchain_core.language_models.fake_chat_models import FakeListChatModel

model = FakeListChatModel(responses=["Noted: Ana lives in Lisbon now.", "Biscuit is a great name for a beagle!",
                                     "Ana lives in Lisbon.", "You told me about Biscuit, your beagle."])'''),
    *real_model_cell('''\
if os.environ.get("SYNAPSE_COOKBOOK_REAL_MODEL"):
    from langchain_openai import ChatOpenAI      # pip install langchain-openai; needs OPENAI_API_KEY
    model = ChatOpenAI(model="gpt-4o-mini", temperature=0)'''),
    new_code_cell('''\
import sqlite3
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph
from synapse_integrations.langgraph import EnginePool, namespace_key, SynapseMemoryNodes, SynapseMemoryState

def agent(state: SynapseMemoryState):
    return {"messages": [model.invoke(state["messages"])]}

def build_graph(pool, conn):
    memory = SynapseMemoryNodes(pool, k=5)          # namespace: user_id, else thread_id
    builder = StateGraph(SynapseMemoryState)       # MessagesState + memories
    builder.add_node("recall", memory.recall)
    builder.add_node("agent", agent)
    builder.add_node("record", memory.record)
    builder.add_edge(START, "recall")
    builder.add_edge("recall", "agent")
    builder.add_edge("agent", "record")
    builder.add_edge("record", END)
    return builder.compile(checkpointer=SqliteSaver(conn))

mem_dir, db = os.path.join(workdir, "memory"), os.path.join(workdir, "checkpoints.sqlite")
pool = EnginePool(mem_dir)
pool.get(namespace_key("agent", "user_id", "sam")).add_turns(demo_turns(20))   # sam already has some history
conn = sqlite3.connect(db, check_same_thread=False)
graph = build_graph(pool, conn)
cfg = {"configurable": {"thread_id": "week-1", "user_id": "sam"}}
system = [{"role": "system", "content": "You are a warm, concise assistant."}]   # the thread's own prompt
for text in ["My sister Ana moved to Lisbon last year.", "I adopted a beagle called Biscuit."]:
    out = graph.invoke({"messages": [*system, {"role": "user", "content": text}]}, cfg)
    system = []
    print("user:", text, "\\n  ai:", out["messages"][-1].content)
print("\\nmessage types in the thread:", [m.type for m in out["messages"]])   # one system message, first'''),
    new_markdown_cell("## Which memories will be activated, and why\n\nBefore asking the graph, ask the engine "
                      "directly: every ranked item with its score components, whether the gate accepts the "
                      "question, and the activated subgraph."),
    new_code_cell(EXPLAIN),
    new_code_cell('''\
question = "Tell me about Ana and Lisbon."
engine = pool.get(namespace_key("agent", "user_id", "sam"))
result = engine.retrieve(question, k=10)
explain(result)
plot_activated(engine, result)'''),
    new_markdown_cell("## What the recall node put into the state"),
    new_code_cell('''\
out = graph.invoke({"messages": [{"role": "user", "content": question}]}, cfg)
print(out["messages"][0].content)           # the leading system message the model saw
print("\\ngate rejected:", out["memory_rejected"])
for m in out["memories"]:
    print(f"{m['score']:.3f}  sim {m['components']['similarity']:.2f}  act {m['components']['activation']:.2f}"
          f"  {m['kind']:7} {m['text'][:60]}")'''),
    new_markdown_cell("## The assistant's echo ranks below the user's own words\n\n"
                      "The fake model answered *Noted: Ana lives in Lisbon now.*: worded like the question, it "
                      "would outrank what the user said. At ingestion it was marked `echo_of` the user's turn "
                      "(cosine >= 0.75 with a user turn just before it), and retrieval ranks it just below "
                      "that turn (the `echo` term of its score). `SynapseMemoryNodes(..., roles=(\"user\",))` "
                      "would record the user's side only."),
    new_code_cell('''\
for it in engine.retrieve("Where does Ana live?", k=4).items:
    print(f"{it.score:.3f}  sim {it.components.similarity:.2f}  echo {it.components.echo:+.3f}  "
          f"{it.speaker:9} {it.text[:50]}  {it.metadata}")'''),
    new_markdown_cell("## Restart: the thread continues with its checkpoint and its memory\n\n"
                      "Close everything (as a process exit would), reopen from disk, continue the same thread."),
    new_code_cell('''\
pool.close(); conn.close()

pool = EnginePool(mem_dir)
conn = sqlite3.connect(db, check_same_thread=False)
graph = build_graph(pool, conn)
print("checkpointed messages:", len(graph.get_state(cfg).values["messages"]))
print("episodes in SYNAPSE:  ", pool.get(namespace_key("agent", "user_id", "sam")).stats()["episodes"])
out = graph.invoke({"messages": [{"role": "user", "content": "What's my dog Biscuit like?"}]}, cfg)
print(out["messages"][0].content.split("<memories>")[-1][:400])   # the memories the model saw
print("ai:", out["messages"][-1].content)'''),
    new_markdown_cell("## `SynapseStore`: a LangGraph store whose search is SYNAPSE retrieval\n\n"
                      "Usable as `builder.compile(store=...)`, `create_agent(store=...)`, or directly. "
                      "`SearchItem.score` is the hybrid score; a query the gate rejects returns nothing."),
    new_code_cell('''\
from synapse_integrations.langgraph import SynapseStore

store = SynapseStore(os.path.join(workdir, "store"))
for key, text in {"pet": "Sam has a beagle called Biscuit.", "family": "Ana, Sam's sister, lives in Lisbon.",
                  "music": "Sam plays the cello on weekends.", "work": "Sam is a data analyst at a solar company.",
                  "travel": "Sam went skiing in Whistler with cousin Dana."}.items():
    store.put(("memories", "sam"), key, {"text": text})
for hit in store.search(("memories",), query="What is the dog called?", limit=3):
    print(f"{hit.score:.3f}  {hit.key:7} {hit.value['text']}")
print("off-topic:", [(h.key, round(h.score, 3)) for h in
                     store.search(("memories",), query="liquid nitrogen boiling point")])  # [] when the gate rejects
print(store.list_namespaces())'''),
    new_code_cell('''\
store.close(); pool.close(); conn.close()
''' + CLEANUP),
]

# -- LlamaIndex -----------------------------------------------------------------------------------
LLAMAINDEX = [
    new_markdown_cell(
        "# LlamaIndex: a chat engine and a query engine with SYNAPSE memory\n\n"
        "Offline, top to bottom: real MiniLM embedder, embedded Chroma in a temporary folder, and "
        "LlamaIndex's `MockLLM` (it echoes the prompt, so you see what memory contributed). It shows "
        "`SynapseMemoryBlock` inside `Memory` for a chat engine (one memory per user through an `EnginePool`), "
        "`SynapseRetriever` in a `RetrieverQueryEngine`, what LlamaIndex instrumentation shows of each "
        "recall, and which memories were activated and why."),
    new_code_cell(DEMO),
    new_code_cell('''\
from llama_index.core.llms import MockLLM

llm = MockLLM()      # echoes its prompt'''),
    *real_model_cell('''\
if os.environ.get("SYNAPSE_COOKBOOK_REAL_MODEL"):
    from llama_index.llms.openai import OpenAI   # pip install llama-index-llms-openai; needs OPENAI_API_KEY
    llm = OpenAI(model="gpt-4o-mini", temperature=0)'''),
    new_markdown_cell("## A chat engine whose memory has a SYNAPSE block\n\n"
                      "LlamaIndex hands a memory block only the messages that overflow the short-term history "
                      "(30,000 tokens by default), so a block that records there records nothing in an ordinary "
                      "chat. `SynapseMemoryBlock` records what each read shows it (after retrieving), and "
                      "`SynapseChatMemory` (a `Memory`) hands it each exchange as soon as the reply is put: every "
                      "turn is remembered. With an `EnginePool` each user (`user_id`) or else each session has "
                      "its own memory."),
    new_code_cell('''\
from llama_index.core.chat_engine import SimpleChatEngine
from synapse_integrations.llama_index import EnginePool, namespace_key, SynapseChatMemory, SynapseMemoryBlock

pool = EnginePool(os.path.join(workdir, "llama"))
pool.get(namespace_key("agent", "user_id", "sam")).add_turns(demo_turns(20))     # sam already has some history
# MockLLM's replies are its whole prompt: record the user's side only (roles=("user",));
# with a real model the default records both sides
memory = SynapseChatMemory.from_defaults(
    session_id="sam-monday",
    memory_blocks=[SynapseMemoryBlock(engine=pool, user_id="sam", k=4, roles=("user",))])
chat = SimpleChatEngine.from_defaults(llm=llm, memory=memory)
for text in ["My sister Ana moved to Lisbon last year.", "I adopted a beagle called Biscuit.",
             "Who went skiing in Whistler with Sam?"]:
    reply = chat.chat(text)
print(str(reply).split("</memory>")[0] + "</memory>")   # MockLLM echoes its prompt: the memory block
print("\\nrecorded in sam's memory:", [e["text"][:40] for e in pool.get(namespace_key("agent", "user_id", "sam")).episodes()[20:]])'''),
    new_markdown_cell("## What instrumentation shows\n\nEach recall (the block's and the retriever's) is a retrieval "
                      "span: `RetrievalStartEvent` (the query), a `SynapseGateEvent` (the gate's decision) and "
                      "`RetrievalEndEvent` (the memories), for any LlamaIndex event handler or tracing integration."),
    new_code_cell('''\
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.event_handlers import BaseEventHandler

class RecallPrinter(BaseEventHandler):
    @classmethod
    def class_name(cls):
        return "RecallPrinter"
    def handle(self, event, **kwargs):
        name = event.class_name()
        if name == "RetrievalStartEvent":
            print(f"retrieval: {event.str_or_query_bundle!s}")
        elif name == "SynapseGateEvent":
            print(f"  gate: {'rejected' if event.rejected else 'accepted'} (confidence {event.confidence:.3f})")
        elif name == "RetrievalEndEvent":
            print(f"  {len(event.nodes)} memories:", [n.node.get_content()[:40] for n in event.nodes])

printer = RecallPrinter()
get_dispatcher().add_event_handler(printer)
_ = chat.chat("Where does my sister live?")
_ = chat.chat("What is the boiling point of liquid nitrogen?")
get_dispatcher().event_handlers.remove(printer)'''),
    new_markdown_cell("## A query engine over the memory"),
    new_code_cell('''\
from llama_index.core.query_engine import RetrieverQueryEngine
from synapse_integrations.llama_index import SynapseRetriever

mem = pool.get(namespace_key("agent", "user_id", "sam"))
retriever = SynapseRetriever(mem, k=4)
query_engine = RetrieverQueryEngine.from_args(retriever, llm=llm)
question = "Where did Sam go skiing, and with whom?"
response = query_engine.query(question)
for n in response.source_nodes:
    c = n.node.metadata["components"]
    print(f"{n.score:.3f}  sim {c['similarity']:.2f}  act {c['activation']:.2f}  pr {c['pagerank']:.2f}  "
          f"lex {c['lexical']:.2f}  {n.node.get_content()[:60]}")
off_topic = retriever.retrieve("quantum chromodynamics on the lattice")
print(f"\\noff-topic question: {len(off_topic)} nodes (none when the gate rejects it)")'''),
    new_markdown_cell("## Which memories were activated, and why"),
    new_code_cell(EXPLAIN),
    new_code_cell('''\
result = mem.retrieve(question, k=10)
explain(result)
plot_activated(mem, result)'''),
    new_code_cell('''\
pool.close()
''' + CLEANUP),
]


# -- MCP ------------------------------------------------------------------------------------------
MCP = [
    new_markdown_cell(
        "# MCP: one memory for any MCP client\n\n"
        "`synapse serve mcp` serves a memory folder as an MCP server: over stdio for the one agent "
        "that spawns it (Claude Desktop, an IDE, a LangGraph agent), or over streamable HTTP for "
        "several (docs/deployment.md). This notebook runs offline, top to bottom: the server is a real "
        "subprocess with the real MiniLM embedder and embedded Chroma in a temporary folder, the "
        "client is the MCP SDK's own, and the agent's chat model is a fake one. It shows:\n\n"
        "1. the tools, and storing turns into a namespace (one memory per user);\n"
        "2. retrieval with the gate's decision and its reason, filters, and *nothing in memory*;\n"
        "3. correcting a memory and asking why a memory was returned;\n"
        "4. a LangChain agent that uses the tools through `langchain-mcp-adapters`.\n\n"
        "It needs the `[server]` extra (the `mcp` SDK) and, for the agent, the `[langchain]` extra "
        "and `langchain-mcp-adapters` (`pip install langchain-mcp-adapters`; `[all]` has the "
        "extras, `[test]` the adapters too)."),
    new_code_cell(DEMO),
    new_markdown_cell("## A client session\n\nEach `async with memory_server()` spawns the server, as an "
                      "MCP host does, and stops it at the end; the memory folder stays. The server holds "
                      "the folder's lock while it runs, so open one session at a time."),
    new_code_cell('''\
import sys
from contextlib import asynccontextmanager
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

folder = os.path.join(workdir, "memory")
server = {"command": sys.executable,
          "args": ["-m", "synapse_integrations.cli", "serve", "mcp", "--path", folder],
          "env": {**os.environ, "ANONYMIZED_TELEMETRY": "False", "TOKENIZERS_PARALLELISM": "false"}}

server_log = open(os.path.join(workdir, "server.log"), "a")   # the server's stderr (its log)

@asynccontextmanager
async def memory_server():
    async with stdio_client(StdioServerParameters(**server), errlog=server_log) as (read, write), \\
            ClientSession(read, write) as session:
        await session.initialize()
        yield session

async def call(session, tool, **args):
    """A tool's result as a dict (its structured content), or the error it names."""
    result = await session.call_tool(tool, args)
    if result.isError:
        return {"error": result.content[0].text}
    return result.structuredContent'''),
    new_markdown_cell("## Tools, and storing turns\n\nEvery tool takes the `namespace` it works on. "
                      "`store_turns` takes turns as `{text, speaker, timestamp, metadata}`; consolidation "
                      "(concepts, the graph) runs as they arrive."),
    new_code_cell('''\
async with memory_server() as session:
    for tool in (await session.list_tools()).tools:
        print(f"{tool.name:14} {tool.description.splitlines()[0][:90]}")
    turns = [{**t, "metadata": {"session": "demo"}} for t in demo_turns(20)]
    stored = await call(session, "store_turns", namespace="sam", turns=turns)
    print("\\nstored", len(stored["ids"]), "turns;", await call(session, "stats", namespace="sam"))'''),
    new_markdown_cell("## Retrieval, the gate and filters\n\n`retrieve` returns memories (turns, with the "
                      "concepts that led to each) and the gate's decision with its reason. A question about "
                      "nothing in memory is rejected, says why, and hands the model no memories. Filters (speakers, a time range, "
                      "metadata with Chroma-style `where`) apply before ranking; a malformed one is an "
                      "error that names the problem."),
    new_code_cell('''\
def show(got, top=3):
    print(got["gate"]["reason"])
    if got["rejected"]:   # no items then: a model is told nothing (include_rejected=True lists them)
        print(f"  ({got['withheld']} ranked memories withheld)")
        return
    for it in got["items"][:top]:
        print(f"  {it['score']:.3f} {it['speaker']}: {it['text'][:60]!r}  led by {it['concepts'][:3]}")

async with memory_server() as session:
    show(await call(session, "retrieve", namespace="sam", query="Where did Sam go skiing, and with whom?", k=3))
    show(await call(session, "retrieve", namespace="sam", query="What is the boiling point of liquid nitrogen?"))
    print("\\nonly Riley's turns:")
    show(await call(session, "retrieve", namespace="sam", query="skiing", speakers=["Riley"], k=3))
    print("\\nonly turns since March 2024 (the trip was in January):")
    show(await call(session, "retrieve", namespace="sam", query="Where did Sam go skiing?", since="2024-03-01"))
    print("\\n" + (await call(session, "retrieve", namespace="sam", query="skiing",
                               where={"session": {"$gt": []}}))["error"])'''),
    new_markdown_cell("## Correcting a memory, and asking why\n\n`update` stores a corrected version: the old "
                      "one is kept as history and ranked right below it. `inspect` with a `query` explains one "
                      "memory's rank: its score terms and the activation path that reached it."),
    new_code_cell('''\
question = "Where did Sam go skiing?"
async with memory_server() as session:
    ski = (await call(session, "retrieve", namespace="sam", query=question, k=1))["items"][0]
    new = await call(session, "update", namespace="sam", id=ski["id"],
                     text=ski["text"].replace("Whistler", "Banff"))
    for it in (await call(session, "retrieve", namespace="sam", query=question, k=2))["items"]:
        print(f"{it['score']:.3f} {it['text'][:60]!r}  superseded_by={it['superseded_by']}")
    why = (await call(session, "inspect", namespace="sam", id=new["id"], query=question))["query"]
    print("\\nthe corrected memory ranks", why["rank"], "- its score terms:")
    print({k: round(v, 3) for k, v in why["item"]["components"].items() if isinstance(v, float) and v})'''),
    new_markdown_cell("## A LangChain agent with the MCP tools\n\n`langchain-mcp-adapters` turns the server's tools "
                      "into LangChain tools (`load_mcp_tools` on a session; `MultiServerMCPClient` for several "
                      "servers); `create_agent` uses them like any other. The model must support tool "
                      "calling; offline, a fake one calls `retrieve` and then answers."),
    new_code_cell('''\
from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, ToolMessage
from langchain_mcp_adapters.tools import load_mcp_tools

class FakeToolModel(FakeMessagesListChatModel):
    def bind_tools(self, tools, **kwargs):
        return self

model = FakeToolModel(responses=[
    AIMessage("", tool_calls=[{"name": "retrieve", "id": "c1", "args": {
        "namespace": "sam", "query": "Where did Sam go skiing?", "k": 3}}]),
    AIMessage("You went skiing in Banff, with your cousin Dana."),
])'''),
    *real_model_cell('''\
if os.environ.get("SYNAPSE_COOKBOOK_REAL_MODEL"):
    from langchain_openai import ChatOpenAI      # pip install langchain-openai; needs OPENAI_API_KEY
    model = ChatOpenAI(model="gpt-4o-mini", temperature=0)'''),
    new_code_cell('''\
async with memory_server() as session:      # one server for the whole run
    tools = await load_mcp_tools(session)
    agent = create_agent(model, tools=tools, system_prompt=(
        "You remember the user's conversations: search them with the memory tools, namespace 'sam'."))
    out = await agent.ainvoke({"messages": [{"role": "user", "content": "Where did I go skiing?"}]})
for m in out["messages"]:
    if isinstance(m, ToolMessage):
        content = m.content[0]["text"] if isinstance(m.content, list) else m.content
        got = json.loads(content)
        first = got["items"][0]["text"][:70] if got.get("items") else None
        print(f" tool {m.name}: {got['gate']['decision'] if 'gate' in got else content[:100]}, "
              f"first memory {first!r}")
    else:
        print(f"{m.type:>5}: {(m.content or m.tool_calls)!s:.200}")'''),
    new_markdown_cell("## In an MCP host\n\nA host that spawns servers (Claude Desktop, an IDE) takes the same "
                      "command in its configuration, e.g.\n\n"
                      '```json\n{"mcpServers": {"synapse-memory": {"command": "synapse",\n'
                      '  "args": ["serve", "mcp", "--path", "/home/me/.synapse-memory"]}}}\n```\n\n'
                      "For several agents at once, serve it over HTTP (`synapse serve http --mcp`, with an API "
                      "key) and point them at `/mcp`: docs/deployment.md."),
    new_code_cell("server_log.close()\n" + CLEANUP),
]


def write(name: str, cells: list, *, execute: bool = True) -> Path:
    nb = new_notebook(cells=cells, metadata={
        "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
        "language_info": {"name": "python"}})
    for i, cell in enumerate(nb.cells):
        cell["id"] = f"{name.split('_')[0]}-{i:02d}"  # stable ids: regenerating gives no diff
    if execute:  # committed with outputs, so they can be read without running them
        from nbclient import NotebookClient

        NotebookClient(nb, timeout=600, kernel_name="python3",
                       resources={"metadata": {"path": str(HERE)}}).execute()
    path = HERE / f"{name}.ipynb"
    nbformat.validate(nb)
    path.write_text(nbformat.writes(nb) + "\n", encoding="utf-8")
    return path


if __name__ == "__main__":
    for name, cells in (("langchain_memory", LANGCHAIN), ("langgraph_memory", LANGGRAPH),
                        ("llama_index_memory", LLAMAINDEX), ("mcp_memory", MCP)):
        names = [a for a in sys.argv[1:] if not a.startswith("--")]
        if names and name not in names:
            continue
        print("wrote", write(name, cells, execute="--no-execute" not in sys.argv))

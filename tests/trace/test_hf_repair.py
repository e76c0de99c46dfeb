"""Inputs corrected from what a model's forward pass says (attn_doctor/tracing/runs/hf_repair.py), on the
messages transformers' models raise: each repair reads the message, never a list of models."""
from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")

from attn_doctor.tracing.runs.hf_repair import _repair  # noqa: E402


def _state(**config):
    image = SimpleNamespace(kwargs={})
    return {"image": image, "count": None, "audio": (), "audio_count": 0, "config": SimpleNamespace(**config),
            "seq_len": 16, "device": "cpu", "dtype": torch.float32, "text_token": 5}


def test_an_image_size_the_model_names_is_the_one_made():
    pixels = torch.ones(1, 3, 224, 224)
    state = _state()
    fixed = _repair({"pixel_values": pixels}, ValueError("Input image size (224*224) doesn't match model (256*192)."), state)
    assert fixed["pixel_values"].shape == (1, 3, 256, 192) and state["image"].kwargs["pixel_values"] is fixed["pixel_values"]
    fixed = _repair({"pixel_values": pixels}, AssertionError("Input height (224) doesn't match model (336)."), _state())
    assert fixed["pixel_values"].shape == (1, 3, 336, 336)


def test_a_video_model_gets_its_configs_frames():
    fixed = _repair({"pixel_values": torch.ones(1, 3, 224, 224)}, ValueError("not enough values to unpack (expected 5, got 4)"),
                    _state(num_frames=16))
    assert fixed["pixel_values"].shape == (1, 16, 3, 224, 224)


def test_arguments_the_forward_says_it_misses_are_made_from_their_names():
    ids = torch.full((1, 16), 5)
    exc = TypeError("InstructBlipForConditionalGeneration.forward() missing 2 required positional arguments: "
                    "'qformer_input_ids' and 'qformer_attention_mask'")
    fixed = _repair({"input_ids": ids}, exc, _state(hidden_size=32))
    assert torch.equal(fixed["qformer_input_ids"], ids) and fixed["qformer_attention_mask"].shape == (1, 16)
    exc = TypeError("VibeVoiceAcousticTokenizerDecoderModel.forward() missing 1 required positional argument: 'hidden_states'")
    assert _repair({"input_ids": ids}, exc, _state(hidden_size=32))["hidden_states"].shape == (1, 16, 32)
    # a name that says nothing about what it holds is not guessed
    exc = TypeError("SegGptModel.forward() missing 2 required positional arguments: 'prompt_pixel_values' and 'prompt_masks'")
    assert _repair({"input_ids": ids}, exc, _state(hidden_size=32)) is None


def test_a_waveform_model_given_a_spectrogram_gets_a_waveform_and_a_codec_its_channel():
    # SpeechT5 has num_mel_bins (its decoder's) but its encoder convolves the raw waveform
    state = dict(_state(), audio=("input_values",))
    exc = RuntimeError("Expected 2D (unbatched) or 3D (batched) input to conv1d, but got input of size: [1, 1, 128, 80]")
    fixed = _repair({"input_values": torch.zeros(1, 128, 80)}, exc, state)
    assert fixed["input_values"].shape == (1, 16000)
    assert _repair(fixed, exc, state) is None  # said once: the same message again is not repaired twice
    # a codec counts channels: [batch, 1, samples]
    state = dict(_state(), audio=("input_values",))
    fixed = _repair({"input_values": torch.zeros(1, 16000)}, ValueError("Audio must be mono, but got 16000"), state)
    assert fixed["input_values"].shape == (1, 1, 16000)
    # the same words about another tensor than the one made: nothing
    assert _repair({"input_values": torch.zeros(1, 8000)}, ValueError("Audio must be mono, but got 16000"),
                   dict(_state(), audio=("input_values",))) is None


def test_an_encoder_decoder_that_takes_either_audio_input_gets_its_encoders():
    # SpeechEncoderDecoderModel's main input is `inputs`; its forward takes input_values and
    # input_features; a wav2vec2 encoder convolves the waveform: input_values, [batch, samples]
    transformers = pytest.importorskip("transformers")
    from attn_doctor.tracing.runs.hf_inputs import make_inputs

    encoder = transformers.Wav2Vec2Config(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64,
                                          conv_dim=(8, 8), conv_stride=(5, 2), conv_kernel=(10, 3), num_feat_extract_layers=2)
    decoder = transformers.BertConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64,
                                      vocab_size=100, is_decoder=True, add_cross_attention=True)
    config = transformers.SpeechEncoderDecoderConfig.from_encoder_decoder_configs(encoder, decoder)
    config.decoder_start_token_id, config.pad_token_id = 1, 0
    model = transformers.SpeechEncoderDecoderModel(config=config)
    kwargs = make_inputs(model, config, 16, "cpu")[0]
    assert "input_values" in kwargs and kwargs["input_values"].dim() == 2 and "input_features" not in kwargs


def test_a_spectrogram_whose_projection_says_time_and_mel_are_swapped_is_transposed():
    # a conv front end flattens channels x the subsampled second axis: 256 x 128/8 where 256 x 80/8 was
    # meant (the mel bins are the last axis for this model, not the second)
    state = dict(_state(), audio=("input_features",))
    exc = RuntimeError("a and b must have same reduction dim, but got [10, 4096] X [2560, 1024].")
    fixed = _repair({"input_features": torch.zeros(1, 80, 128)}, exc, state)
    assert fixed["input_features"].shape == (1, 128, 80)
    assert _repair(fixed, exc, state) is None  # once
    # the projection wanting it larger where the last axis is already the larger: not a swap
    exc = RuntimeError("a and b must have same reduction dim, but got [10, 2560] X [4096, 1024].")
    assert _repair({"input_features": torch.zeros(1, 80, 128)}, exc, dict(_state(), audio=("input_features",))) is None


def test_a_codec_that_broadcasts_the_samples_gets_its_channel_axis():
    state = dict(_state(), audio=("input_values",))
    exc = RuntimeError("Attempting to broadcast a dimension of length 16000 at -2! Mismatching argument at index 1 "
                       "had torch.Size([64, 16000, 1]); but expected shape should be broadcastable to [1, 64, 16005]")
    assert _repair({"input_values": torch.zeros(1, 16000)}, exc, state)["input_values"].shape == (1, 1, 16000)


_DOC = """
        visual_feats (`torch.FloatTensor` of shape `(batch_size, num_visual_features, visual_feat_dim)`):
            The visual features.
        bbox (`torch.LongTensor` of shape `(batch_size, sequence_length, 4)`, *optional*):
            Bounding boxes.
        encoder_hidden_states (`torch.Tensor` of shape `(batch_size, sequence_length, hidden_size)`, *optional*):
            What the cross-attention reads.
        state (`torch.Tensor`, *optional*):
            A robot's state.
"""


def test_an_input_the_forward_names_is_made_in_the_shape_its_docstring_documents():
    from attn_doctor.tracing.runs.hf_documented import documented_shape, named_in_message

    assert documented_shape(_DOC, "bbox") == (["batch_size", "sequence_length", "4"], "torch.LongTensor")
    assert documented_shape(_DOC, "state") is None  # no shape documented: nothing made
    params = ("input_ids", "bbox", "visual_feats", "state", "encoder_hidden_states")
    assert named_in_message("You have to specify bbox", params) == ["bbox"]
    assert named_in_message("`visual_feats` cannot be `None`", params) == ["visual_feats"]
    assert named_in_message("encoder_hidden_states must be given for cross-attention layers", params) == \
        ["encoder_hidden_states"]
    assert named_in_message("You have to specify pixel_values", params) == []  # not a parameter: not this model's
    ids = torch.full((1, 16), 5)
    state = dict(_state(visual_feat_dim=24, hidden_size=32), params=params, doc=_DOC)
    fixed = _repair({"input_ids": ids}, ValueError("`visual_feats` cannot be `None`"), state)
    assert fixed["visual_feats"].shape == (1, 4, 24) and fixed["visual_feats"].dtype == torch.float32
    fixed = _repair(fixed, ValueError("You have to specify bbox"), state)
    assert fixed["bbox"].shape == (1, 16, 4) and fixed["bbox"].dtype == torch.long
    # a made input's width the first projection names: [.., in_features] of its weight
    fixed = _repair({"input_ids": ids}, ValueError("encoder_hidden_states must be given for cross-attention layers"),
                    state)
    assert fixed["encoder_hidden_states"].shape == (1, 16, 32)
    exc = RuntimeError("a and b must have same reduction dim, but got [16, 32] X [1408, 256].")
    assert _repair(fixed, exc, state)["encoder_hidden_states"].shape == (1, 16, 1408)
    # an input without a documented shape is not guessed
    assert _repair({"input_ids": ids}, ValueError("You have to specify state"), state) is None


def test_a_pixel_count_of_channels_comes_from_the_models_first_convolution():
    model = torch.nn.Sequential(torch.nn.Conv2d(4, 8, 3), torch.nn.Conv2d(8, 8, 3))
    state = dict(_state(), model=model)
    fixed = _repair({"pixel_values": torch.ones(1, 3, 32, 32)}, RuntimeError("Invalid channel dimensions"), state)
    assert fixed["pixel_values"].shape == (1, 4, 32, 32)
    # the channels already right (the error is deeper): not repaired
    state = dict(_state(), model=model)
    assert _repair({"pixel_values": torch.ones(1, 4, 32, 32)}, RuntimeError("Invalid channel dimensions"), state) is None


def test_flattened_patches_take_the_width_their_embedding_reads():
    # a Qwen-VL-style tower whose patches hold two frames (or one): the embedding's weight says which
    state = _state()
    exc = RuntimeError("mat1 and mat2 shapes cannot be multiplied (64x588 and 1176x32)")
    fixed = _repair({"pixel_values": torch.ones(64, 588), "grid_thw": torch.tensor([[1, 8, 8]])}, exc, state)
    assert fixed["pixel_values"].shape == (64, 1176) and torch.equal(fixed["grid_thw"], torch.tensor([[1, 8, 8]]))
    assert _repair(fixed, exc, state) is None  # once


class _Refuses(torch.nn.Module):
    """A model whose forward refuses any input: what make_inputs says when nothing it made runs."""
    main_input_name = "input_ids"

    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(10, 4)

    def forward(self, input_ids, input_features=None):
        raise ValueError("this model takes a shape no config describes (features %s)" % (
            "given" if input_features is not None else "absent"))


def test_when_no_made_input_runs_the_last_one_tried_is_said_with_the_models_line():
    from attn_doctor.tracing.errors import TraceError
    from attn_doctor.tracing.runs.hf_inputs import make_inputs

    # a multimodal config built without its audio tower: no audio is made for it
    config = SimpleNamespace(vocab_size=10, audio_config=None)
    with pytest.raises(TraceError) as raised:
        make_inputs(_Refuses(), config, 16, "cpu")
    message = raised.value.message
    assert "the last tried (input_ids [1, 16]) raised ValueError: this model takes a shape no config describes " \
           "(features absent) at " in message, message
    assert "test_hf_repair.py:%d;" % (_Refuses.forward.__code__.co_firstlineno + 1) in message, message
    # with the tower in the config the audio input is made
    with pytest.raises(TraceError) as raised:
        make_inputs(_Refuses(), SimpleNamespace(vocab_size=10, num_mel_bins=8), 16, "cpu")
    assert "(features given)" in raised.value.message and "input_features float32[" in raised.value.message


def test_a_norm_that_counted_time_for_mel_bins_turns_the_spectrogram_round():
    from attn_doctor.tracing.runs.hf_inputs import input_problem

    # CLAP: [batch, 1, time, mel]; made [1, 1, 64, 128] (mel first), its batch norm over the mel bins says so
    exc = RuntimeError("running_mean should contain 128 elements not 64")
    assert input_problem(exc)
    state = dict(_state(), audio=("input_features",))
    fixed = _repair({"input_features": torch.zeros(1, 1, 64, 128)}, exc, state)
    assert fixed["input_features"].shape == (1, 1, 128, 64)
    assert _repair(fixed, exc, state) is None  # once: turning it back would loop


def test_a_layout_the_message_states_and_a_length_it_wants_a_multiple_of_are_made():
    # keypoint matchers take an image pair: "(batch_size, 2, num_channels, height, width)"
    exc = ValueError("Input must be a 5D tensor of shape (batch_size, 2, num_channels, height, width)")
    fixed = _repair({"pixel_values": torch.ones(1, 3, 64, 48)}, exc, _state())
    assert fixed["pixel_values"].shape == (1, 2, 3, 64, 48)
    # a waveform the codec frames in hops, padded up as its feature extractor would
    state = dict(_state(), audio=("input_values",))
    exc = ValueError("`input_values` length 16000 is not a multiple of 1920. Prepare the audio with X")
    assert _repair({"input_values": torch.zeros(1, 16000)}, exc, state)["input_values"].shape == (1, 17280)
    state = dict(_state(), audio=("input_features",))
    exc = ValueError("Encoder expects `padded_feature_length` to be a multiple of `n_window * 2` (100), but got 128.")
    assert _repair({"input_features": torch.zeros(1, 80, 128)}, exc, state)["input_features"].shape == (1, 80, 200)
    # a multiple no made input has the length of: nothing
    assert _repair({"input_features": torch.zeros(1, 80, 64)}, exc, dict(_state(), audio=("input_features",))) is None


def test_both_inputs_a_message_says_go_together_are_named():
    from attn_doctor.tracing.runs.hf_documented import named_in_message

    said = "Both pixel_values and high_res_pixel_values should be specified at the same time"
    assert named_in_message(said, ["input_ids", "pixel_values", "high_res_pixel_values"]) == [
        "pixel_values", "high_res_pixel_values"]


def test_an_input_the_raising_line_reads_off_none_is_made_and_an_image_takes_its_tables_size():
    from attn_doctor.tracing.runs.hf_inputs import input_problem

    def forward(input_ids, pixel_values=None):
        """Args:
            pixel_values (`torch.Tensor` of shape `(batch_size, num_channels, image_size, image_size)`):
                The image.
        """
        return torch.ones(2, 2, dtype=pixel_values.dtype)

    try:
        forward(torch.ones(1, 16))
    except AttributeError as exc:
        raised = exc
    # "no attribute 'dtype'" is about an input never given, not about dtypes
    assert input_problem(raised)
    state = dict(_state(), params={"input_ids": None, "pixel_values": None}, doc=forward.__doc__)
    fixed = _repair({"input_ids": torch.full((1, 16), 5)}, raised, state)
    assert fixed["pixel_values"].shape == (1, 3, 224, 224)  # RGB at the image processors' 224: no config says
    exc = RuntimeError("Attempting to broadcast a dimension of length 448 at -1! Mismatching argument at index 1 had "
                       "torch.Size([448, 448]); but expected shape should be broadcastable to [1, 3, 224, 224]")
    assert _repair(fixed, exc, state)["pixel_values"].shape == (1, 3, 448, 448)


def test_a_patch_grid_that_describes_another_count_than_the_tower_made_takes_that_count():
    grid = torch.ones(1, 2, dtype=torch.long)  # made from the docstring: one patch
    exc = RuntimeError("split_with_sizes expects split_sizes to sum exactly to 196 (input tensor's size at "
                       "dimension 0), but got split_sizes=[1]")
    state = _state()
    fixed = _repair({"pixel_values": torch.ones(1, 3, 224, 224), "image_grid_hw": grid}, exc, state)
    assert fixed["image_grid_hw"].tolist() == [[14, 14]]
    assert _repair(fixed, exc, state) is None  # once
    fixed = _repair({"image_grid_thw": torch.ones(1, 3, dtype=torch.long)}, exc.__class__(
        str(exc).replace("196", "10")), _state())
    assert fixed["image_grid_thw"].tolist() == [[1, 1, 10]]
